package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// listen.insecure on every interface is an unauthenticated remote shell: the
// agent's configuration is refused, naming the key and the switch that would
// allow it. With listen.insecure_allow_remote it serves, and says in its log
// that it is unsafe.
func TestListenInsecureOffLoopbackNeedsItsOwnSwitch(t *testing.T) {
	isolateEnv(t)
	conf := `
name = "web-1"
mode = "listen"

[listen]
address = "0.0.0.0:0"
insecure = true
`
	_, err := execute(t, "check-config", "--config", writeConfig(t, conf))
	require.Equal(t, []string{`listen.insecure: plaintext without certificates on listen.address "0.0.0.0:0", ` +
		"which is not a loopback address: set listen.ca_cert_path, listen.cert_path and listen.key_path, " +
		"or listen.insecure_allow_remote = true " +
		"(unsafe: anyone who reaches the address acts without an identity, and the link is in clear)"},
		problemLines(t, err))

	out, stop := serve(t, "--config", writeConfig(t, conf+"insecure_allow_remote = true\n"))
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "serving agent service") },
		10*time.Second, 10*time.Millisecond, "log so far:\n%s", out)
	require.Contains(t, out.String(), "plaintext link allowed off loopback, unsafe")
	require.Contains(t, out.String(), "key=listen.insecure_allow_remote")
	require.NoError(t, stop())
}

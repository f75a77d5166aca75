package config_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/config"
)

// plaintextProblem is the refusal of section.insecure on addrKey's address.
func plaintextProblem(section, addrKey, addr string) string {
	return section + ".insecure: plaintext without certificates on " + addrKey + ` "` + addr + `", ` +
		"which is not a loopback address: set " + section + ".ca_cert_path, " + section + ".cert_path and " +
		section + ".key_path, or " + section + ".insecure_allow_remote = true " +
		"(unsafe: anyone who reaches the address acts without an identity, and the link is in clear)"
}

// Every insecure switch is refused off loopback, naming the key: a listen
// agent with listen.insecure on 0.0.0.0 is an unauthenticated remote shell,
// Thorax's agents port and Mandible's gRPC take anyone for an agent or a
// Thorax, and a plaintext client link trusts whoever answers. Loopback needs
// no second switch; insecure_allow_remote admits any address.
func TestInsecureIsRefusedOffLoopback(t *testing.T) {
	t.Parallel()
	type link struct {
		section, addrKey string
		// dial is a client link: its address must name a host.
		dial bool
		// validate checks the configuration with the link plaintext on addr,
		// and insecure_allow_remote as allow says.
		validate func(addr string, allowRemote bool) error
	}
	plaintext := func(tls *config.TLS, allowRemote bool) {
		*tls = config.TLS{Insecure: true, InsecureAllowRemote: allowRemote}
	}
	links := []link{
		{"listen", "listen.address", false, func(addr string, allow bool) error {
			c := validAgent(config.ModeListen)
			c.Listen.Address = addr
			plaintext(&c.Listen.TLS, allow)
			return c.Validate()
		}},
		{"thorax", "thorax.address", true, func(addr string, allow bool) error {
			c := validAgent(config.ModePoll)
			c.Thorax.Address = addr
			plaintext(&c.Thorax.TLS, allow)
			return c.Validate()
		}},
		{"agents", "agents.listen", false, func(addr string, allow bool) error {
			c := validThorax()
			c.Agents.Listen = addr
			plaintext(&c.Agents.TLS, allow)
			return c.Validate()
		}},
		{"mandible", "mandible.address", true, func(addr string, allow bool) error {
			c := validThorax()
			c.Mandible.Address = addr
			plaintext(&c.Mandible.TLS, allow)
			return c.Validate()
		}},
		{"grpc", "grpc.listen", false, func(addr string, allow bool) error {
			c := validMandible()
			c.GRPC.Listen = addr
			plaintext(&c.GRPC.TLS, allow)
			return c.Validate()
		}},
	}
	for _, l := range links {
		for _, addr := range []string{"0.0.0.0:9191", ":9191", "10.0.0.7:9191", "host-1:9191"} {
			if l.dial && addr == ":9191" {
				continue // refused anyway: a dial address names a host
			}
			require.Equal(t, []string{plaintextProblem(l.section, l.addrKey, addr)}, problems(t, l.validate(addr, false)),
				"%s.insecure on %s", l.section, addr)
			require.NoError(t, l.validate(addr, true), "%s.insecure_allow_remote admits %s", l.section, addr)
		}
		for _, addr := range []string{"127.0.0.1:9191", "[::1]:9191", "localhost:9191", "127.0.0.2:9191"} {
			require.NoError(t, l.validate(addr, false), "%s.insecure on loopback %s", l.section, addr)
		}
	}
}

// The second switch is read from the file under the name the samples give it.
func TestInsecureAllowRemoteIsReadFromTheFile(t *testing.T) {
	t.Parallel()
	conf := `
name = "web-1"
mode = "listen"

[listen]
address = "0.0.0.0:9191"
insecure = true
`
	_, err := config.LoadAgent(writeFile(t, "agent.toml", conf), nil)
	require.Equal(t, []string{plaintextProblem("listen", "listen.address", "0.0.0.0:9191")}, problems(t, err))

	c, err := config.LoadAgent(writeFile(t, "agent.toml", conf+"insecure_allow_remote = true\n"), nil)
	require.NoError(t, err)
	require.True(t, c.Listen.RemotePlaintext())

	c, err = config.LoadAgent(writeFile(t, "agent.toml", conf), env(map[string]string{"MANTIS_LISTEN_INSECURE_ALLOW_REMOTE": "true"}))
	require.NoError(t, err, "and from the environment")
	require.True(t, c.Listen.RemotePlaintext())
}

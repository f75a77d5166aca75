package webhook

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every kind of inside address is named, an IPv4 address written as IPv6 too, and
// public addresses are not.
func TestNonPublicNamesInsideAddresses(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]string{
		"127.0.0.1": "loopback", "::1": "loopback", "::ffff:127.0.0.1": "loopback",
		"10.1.2.3": "private", "172.16.0.1": "private", "192.168.1.1": "private", "fd00::1": "private",
		"169.254.169.254": "link-local", "fe80::1": "link-local",
		"0.0.0.0": "unspecified", "::": "unspecified", "0.1.2.3": "unspecified",
		"100.64.0.1": "shared (carrier-grade NAT)", "224.0.0.251": "link-local", "239.1.1.1": "multicast",
		"255.255.255.255": "non-unicast",
		"93.184.215.14":   "", "2606:4700::1111": "",
	} {
		require.Equal(t, want, nonPublic(netip.MustParseAddr(addr)), addr)
	}
	require.Error(t, publicOnly("tcp", "169.254.169.254:80", nil))
	require.NoError(t, publicOnly("tcp", "93.184.215.14:443", nil))
}

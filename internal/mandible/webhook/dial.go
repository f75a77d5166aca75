package webhook

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// sharedAddressSpace is 100.64.0.0/10 (RFC 6598), the carrier-grade NAT range that
// clouds also use inside their networks.
var sharedAddressSpace = netip.MustParsePrefix("100.64.0.0/10")

// nonPublic names the kind of a non-public address ("loopback", "private",
// "link-local", ...), or returns "" for a public unicast address. An IPv4 address
// written as IPv6 (::ffff:a.b.c.d) is judged as the IPv4 address it is.
func nonPublic(a netip.Addr) string {
	a = a.Unmap()
	switch {
	case a.IsLoopback():
		return "loopback"
	case a.IsLinkLocalUnicast(), a.IsLinkLocalMulticast():
		return "link-local"
	case a.IsUnspecified(), a.Is4() && a.As4()[0] == 0:
		return "unspecified"
	case a.IsMulticast():
		return "multicast"
	case a.IsPrivate():
		return "private"
	case a.Is4() && sharedAddressSpace.Contains(a):
		return "shared (carrier-grade NAT)"
	case !a.IsGlobalUnicast():
		return "non-unicast"
	}
	return ""
}

// privateAddressError is the refusal of a connection to a non-public address by a
// webhook that does not allow it.
type privateAddressError struct {
	Addr netip.Addr
	Kind string
}

func (e *privateAddressError) Error() string {
	return fmt.Sprintf("%s is a %s address: the webhook needs allow_private_network to reach it", e.Addr, e.Kind)
}

// publicOnly is the net.Dialer Control of the deliveries of webhooks that do not
// allow private networks. It runs on the address about to be connected to, after
// DNS, for every address tried: a public name that resolves to an inside address,
// now or on the next lookup (DNS rebinding), is refused all the same.
func publicOnly(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("refusing to connect to %q: not an IP address and port", address)
	}
	if kind := nonPublic(ap.Addr()); kind != "" {
		return &privateAddressError{Addr: ap.Addr().Unmap(), Kind: kind}
	}
	return nil
}

// deliveryClient is an HTTP client for deliveries: bounded by timeout, following
// no redirect, connecting directly (a proxy would connect on its behalf, past
// control), each connection checked by control when it is set.
func deliveryClient(timeout time.Duration, control func(network, address string, c syscall.RawConn) error) *http.Client {
	d := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second, Control: control}
	t := &http.Transport{
		Proxy:                 nil,
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   timeout,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{Timeout: timeout, Transport: t, CheckRedirect: noRedirects}
}

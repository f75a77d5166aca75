package devstack

import (
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
)

// resolvePorts fills zero ports with free loopback ports, all below 32768, clear of
// the ephemeral range: a port chosen there can be taken, between its choice and the
// server's bind, as the source port of any outgoing connection (the stack's own
// readiness probes among them), which once failed Temporal's UI with "address
// already in use".
func resolvePorts(p Ports) (Ports, error) {
	all := []*int{&p.Postgres, &p.AMQPS, &p.RabbitMQManagement, &p.RabbitMQDist, &p.EPMD,
		&p.Temporal, &p.TemporalUI, &p.TemporalHTTP, &p.TemporalMetrics}
	taken := map[int]bool{}
	for _, v := range all {
		taken[*v] = *v != 0
	}
	for _, v := range all {
		for *v == 0 {
			port, err := FreePort(true)
			if err != nil {
				return p, err
			}
			if !taken[port] { // a port free now may be another of these already
				*v, taken[port] = port, true
			}
		}
	}
	return p, nil
}

// FreePort returns a loopback TCP port nobody listens on. With low it is chosen in
// 20000-32767, below the ephemeral range.
func FreePort(low bool) (int, error) {
	if !low {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		defer l.Close()
		return l.Addr().(*net.TCPAddr).Port, nil
	}
	for range 200 {
		port := 20000 + mrand.IntN(12768)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			l.Close()
			return port, nil
		}
	}
	return 0, errors.New("no free port below 32768")
}

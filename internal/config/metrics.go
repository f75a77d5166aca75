package config

import "net"

// MetricsListenKey is the key of the metrics listener's address.
const MetricsListenKey = "metrics.listen"

// Metrics is the opt-in plain-HTTP listener of Thorax and the agent: /metrics
// (the Prometheus Go and process collectors) and /healthz. It is off while
// Listen is empty.
type Metrics struct {
	// Listen is host:port to serve on; empty turns the listener off. It is
	// plain HTTP, so keep it on loopback or a private network. The host is
	// required: a bare ":9100" would listen on every interface, so listening on
	// all of them is written out as 0.0.0.0:9100.
	Listen string `toml:"listen"`
}

// Enabled reports whether the listener is configured.
func (m Metrics) Enabled() bool { return m.Listen != "" }

func (m Metrics) validate(p *problems) {
	if !m.Enabled() {
		return
	}
	p.listenAddress(MetricsListenKey, m.Listen)
	if host, port, err := net.SplitHostPort(m.Listen); err == nil && host == "" {
		p.add(MetricsListenKey, "must name a host, got %q: write 127.0.0.1:%s for loopback only, "+
			"or 0.0.0.0:%s to listen on all interfaces", m.Listen, port, port)
	}
}

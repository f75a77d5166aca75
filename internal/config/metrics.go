package config

// Metrics is the opt-in plain-HTTP listener of Thorax and the agent: /metrics
// (the Prometheus Go and process collectors) and /healthz. It is off while
// Listen is empty.
type Metrics struct {
	// Listen is host:port to serve on; empty turns the listener off. It is
	// plain HTTP, so keep it on loopback or a private network.
	Listen string `toml:"listen"`
}

// Enabled reports whether the listener is configured.
func (m Metrics) Enabled() bool { return m.Listen != "" }

func (m Metrics) validate(p *problems) {
	if m.Enabled() {
		p.listenAddress("metrics.listen", m.Listen)
	}
}

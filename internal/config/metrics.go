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
	p.hostedListenAddress(MetricsListenKey, m.Listen)
}

// hostedListenAddress checks the address of a plain-HTTP side listener: a valid
// listen address that names its host, so that all interfaces are never chosen by
// leaving the host out.
func (p *problems) hostedListenAddress(key, addr string) {
	p.listenAddress(key, addr)
	if host, port, err := net.SplitHostPort(addr); err == nil && host == "" {
		p.add(key, "must name a host, got %q: write 127.0.0.1:%s for loopback only, "+
			"or 0.0.0.0:%s to listen on all interfaces", addr, port, port)
	}
}

// Debug holds Mandible's opt-in diagnostics.
type Debug struct {
	// PprofListen is host:port of a plain-HTTP listener serving Go profiles under
	// /debug/pprof/; empty (the default) serves none. Profiles reveal the process's
	// internals and a CPU profile costs CPU while it runs: keep it on loopback.
	PprofListen string `toml:"pprof_listen"`
}

func (d Debug) validate(p *problems) {
	if d.PprofListen != "" {
		p.hostedListenAddress("debug.pprof_listen", d.PprofListen)
	}
}

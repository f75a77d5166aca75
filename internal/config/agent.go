package config

import (
	"log/slog"
	"time"
)

// Agent modes: who opens the connection between an agent and its Thorax.
const (
	// ModePoll agents call their Thorax for work.
	ModePoll = "poll"
	// ModeListen agents serve an endpoint their Thorax calls.
	ModeListen = "listen"
)

// Agent is the configuration of the agent on one target host.
type Agent struct {
	// Name identifies the target; required.
	Name string `toml:"name"`
	// Mode is ModePoll or ModeListen; required.
	Mode string `toml:"mode"`
	// Labels are free key/value pairs reported when the agent registers.
	Labels map[string]string `toml:"labels"`
	Log    Log               `toml:"log"`
	// Thorax is the server a poll-mode agent calls.
	Thorax Endpoint `toml:"thorax"`
	// Listen is the server a listen-mode agent serves for Thorax.
	Listen Endpoint `toml:"listen"`
	Exec   Exec     `toml:"exec"`
}

// Exec bounds the commands the agent runs.
type Exec struct {
	MaxConcurrent int `toml:"max_concurrent"`
	// DefaultTimeout applies to commands that carry none.
	DefaultTimeout Duration `toml:"default_timeout"`
	// OutputLimitBytes caps the output kept per command.
	OutputLimitBytes int `toml:"output_limit_bytes"`
	// Shell runs each command as Shell -c command.
	Shell string `toml:"shell"`
}

// DefaultAgent returns the agent's defaults. Name and mode have none and
// must be configured.
func DefaultAgent() Agent {
	return Agent{
		Log: defaultLog(),
		Exec: Exec{
			MaxConcurrent:    4,
			DefaultTimeout:   Duration{10 * time.Minute},
			OutputLimitBytes: 64 << 10,
			Shell:            "/bin/sh",
		},
	}
}

// LoadAgent returns the agent's configuration: the defaults, then the TOML
// file at path (none when path is ""), then the MANTIS_ variables env
// defines (nil for none), validated.
func LoadAgent(path string, env func(string) (string, bool)) (Agent, error) {
	cfg := DefaultAgent()
	_, errs, err := load(&cfg, path, env)
	if err != nil {
		return Agent{}, err
	}
	return finish(cfg, errs)
}

// Validate reports every problem of the configuration at once. Only the
// section of the configured mode (thorax or listen) is checked.
func (c Agent) Validate() error {
	var p problems
	p.name("name", c.Name)
	switch c.Mode {
	case ModePoll:
		p.dialAddress("thorax.address", c.Thorax.Address)
		c.Thorax.TLS.validate(&p, "thorax")
	case ModeListen:
		p.listenAddress("listen.address", c.Listen.Address)
		c.Listen.TLS.validate(&p, "listen")
	case "":
		p.add("mode", "required (poll or listen)")
	default:
		p.add("mode", "must be poll or listen, got %q", c.Mode)
	}
	for k := range c.Labels {
		if k == "" {
			p.add("labels", "keys must not be empty")
		}
	}
	c.Log.validate(&p)
	p.positive("exec.max_concurrent", int64(c.Exec.MaxConcurrent))
	p.positive("exec.output_limit_bytes", int64(c.Exec.OutputLimitBytes))
	p.required("exec.shell", c.Exec.Shell, "required")
	p.durations(c)
	return p.err()
}

// String returns the configuration as TOML with its secrets redacted.
func (c Agent) String() string { return render(c) }

// GoString is String, so that %#v does not print secrets either.
func (c Agent) GoString() string { return render(c) }

// LogValue returns the configuration with its secrets redacted.
func (c Agent) LogValue() slog.Value { return logValue(c) }

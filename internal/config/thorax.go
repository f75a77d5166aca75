package config

import (
	"log/slog"
	"time"
)

// Thorax is the configuration of an execution-tier instance (thorax.toml).
type Thorax struct {
	// Name is this instance's configured name, shown in logs and sent when
	// registering (Mandible issues the instance id); it matches
	// `[A-Za-z0-9._-]{1,64}`.
	Name string `toml:"name"`
	// Log is the process's log output, on standard error.
	Log Log `toml:"log"`
	// Mandible is Mandible's gRPC server, which Thorax calls with mutual TLS.
	Mandible Endpoint `toml:"mandible"`
	// Queue is the RabbitMQ broker. When enabled, Thorax consumes the three
	// priority queues Mandible declares, with manual acknowledgement, and claims
	// each nudged command at once; its user needs only read permission.
	Queue ThoraxQueue `toml:"queue"`
	// Polling is how often Thorax asks Mandible for pending commands.
	Polling Polling `toml:"polling"`
	// Heartbeat is how often Thorax tells Mandible it is alive.
	Heartbeat Heartbeat `toml:"heartbeat"`
	// Agents is the agent link: the server poll-mode agents connect to, and
	// the TLS Thorax also dials listen-mode agents with.
	Agents ThoraxAgents `toml:"agents"`
	// Drain bounds the graceful stop on SIGTERM: Thorax stops claiming, hands back
	// to Mandible the commands no agent took, then waits for the rest.
	Drain Drain `toml:"drain"`
	// Metrics is the opt-in plain-HTTP listener of /metrics, /healthz and /readyz.
	Metrics Metrics `toml:"metrics"`
	// Tracing sends OpenTelemetry spans; off while tracing.endpoint is empty.
	Tracing Tracing `toml:"tracing"`
}

// ThoraxAgents is the agent link in both directions. Poll-mode agents call
// the listener; Thorax calls listen-mode agents with the same files: it
// presents the same certificate pair (the "thorax" pair, valid for server and
// client authentication) and verifies the agent's server certificate against
// the same CA, and that it names the target called
// (spiffe://mantis/agent/<target>). Insecure turns both directions to
// plaintext, on loopback only unless InsecureAllowRemote is set.
type ThoraxAgents struct {
	Listener
	// MaxConcurrentCalls bounds the listen-mode RunCommand calls in flight
	// at once, over all agents.
	MaxConcurrentCalls int `toml:"max_concurrent_calls"`
}

func (a ThoraxAgents) validate(p *problems) {
	a.Listener.validate(p, "agents")
	p.positive("agents.max_concurrent_calls", int64(a.MaxConcurrentCalls))
}

// Drain bounds the graceful stop on SIGTERM.
type Drain struct {
	// Timeout is how long Thorax waits for running listen-mode calls and
	// for the results of commands poll-mode agents took, after handing back
	// what no agent took yet. What is still out when it passes is abandoned
	// to Mandible's failure handling.
	Timeout Duration `toml:"timeout"`
}

// Polling is how often Thorax asks Mandible for pending commands.
type Polling struct {
	// Interval applies while the broker delivers nudges.
	Interval Duration `toml:"interval"`
	// FallbackInterval applies while the broker is unreachable, and
	// whenever no broker consumer reports a healthy broker (including
	// queue.enabled = false).
	FallbackInterval Duration `toml:"fallback_interval"`
	// MaxHeldCommands is the most commands the instance holds at once:
	// claimed and not yet stored, handed back or redispatched. A fetch asks
	// Mandible for at most the free room.
	MaxHeldCommands int `toml:"max_held_commands"`
}

// Heartbeat is how often Thorax tells Mandible it is alive.
type Heartbeat struct {
	// Interval is how often Thorax sends its heartbeat; keep it well below
	// Mandible's thorax.heartbeat_timeout.
	Interval Duration `toml:"interval"`
}

// DefaultThorax returns Thorax's defaults.
func DefaultThorax() Thorax {
	return Thorax{
		Name:     hostName(64),
		Log:      defaultLog(),
		Mandible: Endpoint{Address: "127.0.0.1:9090"},
		Queue:    ThoraxQueue{Queue: defaultQueue(), PrefetchCount: 10},
		Polling: Polling{
			Interval:         Duration{5 * time.Second},
			FallbackInterval: Duration{1 * time.Second},
			MaxHeldCommands:  256,
		},
		Heartbeat: Heartbeat{Interval: Duration{5 * time.Second}},
		Agents: ThoraxAgents{
			Listener:           Listener{Listen: "127.0.0.1:9190"},
			MaxConcurrentCalls: 64,
		},
		Drain: Drain{Timeout: Duration{25 * time.Second}},
	}
}

// LoadThorax returns Thorax's configuration: the defaults, then the TOML
// file at path (none when path is ""), then the MANTIS_ variables env
// defines (nil for none), validated.
func LoadThorax(path string, env func(string) (string, bool)) (Thorax, error) {
	return loadAndFinish(DefaultThorax(), path, env)
}

// Validate reports every problem of the configuration at once.
func (c Thorax) Validate() error {
	var p problems
	p.name("name", c.Name)
	c.Log.validate(&p)
	p.dialAddress("mandible.address", c.Mandible.Address)
	c.Mandible.TLS.validate(&p, "mandible")
	c.Mandible.TLS.validatePlaintext(&p, "mandible", "mandible.address", c.Mandible.Address)
	c.Queue.validate(&p)
	p.positive("polling.max_held_commands", int64(c.Polling.MaxHeldCommands))
	c.Agents.validate(&p)
	c.Metrics.validate(&p)
	p.durations(c)
	return p.err()
}

// String returns the configuration as TOML with its secrets redacted.
func (c Thorax) String() string { return render(c) }

// GoString is String, so that %#v does not print secrets either.
func (c Thorax) GoString() string { return render(c) }

// LogValue returns the configuration with its secrets redacted.
func (c Thorax) LogValue() slog.Value { return logValue(c) }

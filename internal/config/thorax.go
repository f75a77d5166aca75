package config

import (
	"log/slog"
	"time"
)

// Thorax is the configuration of an execution-tier instance (thorax.toml).
type Thorax struct {
	// Name is this instance's configured name, shown in logs and sent when
	// registering; Mandible issues the instance id.
	Name string `toml:"name"`
	Log  Log    `toml:"log"`
	// Mandible is the gRPC server to call: a client link.
	Mandible  Endpoint    `toml:"mandible"`
	Queue     ThoraxQueue `toml:"queue"`
	Polling   Polling     `toml:"polling"`
	Heartbeat Heartbeat   `toml:"heartbeat"`
	// Agents is the server poll-mode agents connect to.
	Agents Listener `toml:"agents"`
}

// Polling is how often Thorax asks Mandible for pending commands.
type Polling struct {
	// Interval applies while the broker delivers nudges.
	Interval Duration `toml:"interval"`
	// FallbackInterval applies while the broker is unreachable.
	FallbackInterval Duration `toml:"fallback_interval"`
}

// Heartbeat is how often Thorax tells Mandible it is alive.
type Heartbeat struct {
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
		},
		Heartbeat: Heartbeat{Interval: Duration{5 * time.Second}},
		Agents:    Listener{Listen: "127.0.0.1:9190"},
	}
}

// LoadThorax returns Thorax's configuration: the defaults, then the TOML
// file at path (none when path is ""), then the MANTIS_ variables env
// defines (nil for none), validated.
func LoadThorax(path string, env func(string) (string, bool)) (Thorax, error) {
	cfg := DefaultThorax()
	_, errs, err := load(&cfg, path, env)
	if err != nil {
		return Thorax{}, err
	}
	return finish(cfg, errs)
}

// Validate reports every problem of the configuration at once.
func (c Thorax) Validate() error {
	var p problems
	p.name("name", c.Name)
	c.Log.validate(&p)
	p.dialAddress("mandible.address", c.Mandible.Address)
	c.Mandible.TLS.validate(&p, "mandible")
	c.Queue.validate(&p)
	c.Agents.validate(&p, "agents")
	p.durations(c)
	return p.err()
}

// String returns the configuration as TOML with its secrets redacted.
func (c Thorax) String() string { return render(c) }

// GoString is String, so that %#v does not print secrets either.
func (c Thorax) GoString() string { return render(c) }

// LogValue returns the configuration with its secrets redacted.
func (c Thorax) LogValue() slog.Value { return logValue(c) }

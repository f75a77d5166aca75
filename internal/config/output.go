package config

import "time"

// Output bounds the live output Mandible stores (the [output] section).
type Output struct {
	// MaxBytesPerCommand is the most live output stored per command; beyond it one
	// truncation marker is stored. The result's own output tail is not affected.
	MaxBytesPerCommand int64 `toml:"max_bytes_per_command"`
}

// Retention is how long Mandible keeps what grows without end (the [retention]
// section).
type Retention struct {
	// Events is how long the event log and the live output are kept; a stream resuming
	// from before what is kept gets an SSE reset event.
	Events Duration `toml:"events"`
	// Interval is how often each replica prunes what is older than Events.
	Interval Duration `toml:"interval"`
}

// maxOutputBytesPerCommand bounds output.max_bytes_per_command (1 GiB).
const maxOutputBytesPerCommand = 1 << 30

func defaultOutput() Output { return Output{MaxBytesPerCommand: 1 << 20} }

func defaultRetention() Retention {
	return Retention{Events: Duration{30 * 24 * time.Hour}, Interval: Duration{time.Hour}}
}

func (o Output) validate(p *problems) {
	p.positive("output.max_bytes_per_command", o.MaxBytesPerCommand)
	if o.MaxBytesPerCommand > maxOutputBytesPerCommand {
		p.add("output.max_bytes_per_command", "must be at most %d, got %d", maxOutputBytesPerCommand, o.MaxBytesPerCommand)
	}
}

package config

import (
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
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
	// Name is the name of the target this agent runs commands for, which its
	// certificate carries; required, it matches `[A-Za-z0-9._-]{1,64}`.
	Name string `toml:"name"`
	// Mode is "poll" (the agent calls its Thorax) or "listen" (its Thorax calls
	// the agent); required.
	Mode string `toml:"mode"`
	// Labels are free key/value pairs reported when the agent registers.
	Labels map[string]string `toml:"labels"`
	// Log is the process's log output, on standard error.
	Log Log `toml:"log"`
	// Thorax is the server a poll-mode agent calls, with mutual TLS; the
	// agent's client certificate names its target. Checked in poll mode only.
	Thorax Endpoint `toml:"thorax"`
	// Listen is the server a listen-mode agent serves for Thorax, with mutual
	// TLS. Checked in listen mode only.
	Listen AgentListen `toml:"listen"`
	// Exec bounds the commands the agent runs.
	Exec Exec `toml:"exec"`
	// Journal is the run journal: one small file per dispatch request, so that a
	// request runs at most once on the host across restarts and a result not yet
	// acknowledged is reported after one.
	Journal AgentJournal `toml:"journal"`
	// Metrics is the opt-in plain-HTTP listener of /metrics, /healthz and /readyz.
	Metrics Metrics `toml:"metrics"`
	// Tracing sends OpenTelemetry spans; off while tracing.endpoint is empty.
	Tracing Tracing `toml:"tracing"`
}

// AgentJournal is the agent's run journal: a directory of small files that
// records, per dispatch request, that a run started and how it ended, so a
// request runs at most once on the host across agent restarts, and a result
// not yet acknowledged by Thorax is reported after a restart. It holds no
// command text and no environment.
type AgentJournal struct {
	// Dir is the journal's directory, absolute; each agent on a host needs its
	// own. Empty means $STATE_DIRECTORY/<name>/journal under systemd, else
	// /var/lib/mantis/agent/<name>/journal as root, else
	// $XDG_STATE_HOME/mantis/agent/<name>/journal (~/.local/state when unset).
	Dir string `toml:"dir"`
}

// Default bases of the journal directory, under which each agent has
// <name>/journal.
const (
	// stateDirectoryEnv is set by systemd for a unit with StateDirectory=.
	stateDirectoryEnv = "STATE_DIRECTORY"
	// rootStateBase is the base for an agent running as root.
	rootStateBase = "/var/lib/mantis/agent"
	// userStateSuffix is joined to $XDG_STATE_HOME (or ~/.local/state) for
	// an agent running as another user.
	userStateSuffix = "mantis/agent"
)

// JournalDir returns journal.dir, or when it is empty the default:
// $STATE_DIRECTORY/<name>/journal under systemd, else
// /var/lib/mantis/agent/<name>/journal as root, else
// $XDG_STATE_HOME/mantis/agent/<name>/journal (~/.local/state when unset).
func (c Agent) JournalDir() string {
	if c.Journal.Dir != "" {
		return c.Journal.Dir
	}
	return filepath.Join(stateBase(), c.Name, "journal")
}

// stateBase is the directory under which agents keep their state by default.
func stateBase() string {
	if dirs := os.Getenv(stateDirectoryEnv); dirs != "" {
		first, _, _ := strings.Cut(dirs, ":")
		return first
	}
	if os.Geteuid() == 0 {
		return rootStateBase
	}
	if xdg := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(xdg) {
		return filepath.Join(xdg, userStateSuffix)
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "state", userStateSuffix)
	}
	return filepath.Join(os.TempDir(), userStateSuffix)
}

// AgentListen is the server a listen-mode agent serves: its address and TLS,
// and whom it accepts. Its certificate must be the agent of the configured
// name (spiffe://mantis/agent/<name>): Thorax calls a target only at a server
// whose certificate names it, and the agent runs only commands for its name.
type AgentListen struct {
	Endpoint
	// AllowedClientNames, when set, narrows the Thorax certificates accepted
	// to those whose name (spiffe://mantis/thorax/<name>, or for a
	// certificate from before identities its CommonName or a DNS name) is one
	// of these; others are refused at the handshake. Empty, the default,
	// accepts every certificate of the thorax role signed by ca_cert_path.
	// Whatever it says, only the thorax role may call: another agent's or a
	// CLI's certificate is refused (PermissionDenied).
	AllowedClientNames []string `toml:"allowed_client_names"`
}

// Exec bounds the commands the agent runs.
type Exec struct {
	// MaxConcurrent is the most commands run at once.
	MaxConcurrent int `toml:"max_concurrent"`
	// DefaultTimeout applies to commands that carry none.
	DefaultTimeout Duration `toml:"default_timeout"`
	// OutputLimitBytes caps the output kept per command (its end), at most
	// 1048576 (1 MiB, what Mandible keeps of a result).
	OutputLimitBytes int `toml:"output_limit_bytes"`
	// Shell runs each command as Shell -c command.
	Shell string `toml:"shell"`
	// WorkingDir is where commands that name no directory run; empty means
	// the agent's own working directory. It must be absolute.
	WorkingDir string `toml:"working_dir"`
	// KillGrace is how long a process group has between SIGTERM and SIGKILL
	// when a command times out, is cancelled, or leaves processes behind.
	KillGrace Duration `toml:"kill_grace"`
	// StopTimeout is how long running commands may go on when the agent is
	// asked to stop, before their process groups are killed. A stop takes at
	// most about stop_timeout + kill_grace + 5 s (reporting the last results),
	// which should stay within the supervisor's own stop timeout.
	StopTimeout Duration `toml:"stop_timeout"`
	// PassEnv names variables of the agent's own environment that commands get
	// besides the base set (PATH, HOME, LANG, LC_*, TZ, USER, LOGNAME, SHELL,
	// TMPDIR) and the step's env. Nothing else of the agent's environment
	// reaches a command: not its env file, OTEL_* or its MANTIS_* settings.
	PassEnv []string `toml:"pass_env"`
}

// MaxOutputLimitBytes is the largest exec.output_limit_bytes: Mandible keeps the last
// 1 MiB of a result's output, and a result must stay well under gRPC's 4 MiB message
// limit, or it could not be sent at all.
const MaxOutputLimitBytes = 1 << 20

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
			KillGrace:        Duration{5 * time.Second},
			StopTimeout:      Duration{15 * time.Second},
			PassEnv:          []string{}, // the base environment only
		},
	}
}

// LoadAgent returns the agent's configuration: the defaults, then the TOML
// file at path (none when path is ""), then the MANTIS_ variables env
// defines (nil for none), validated.
func LoadAgent(path string, env func(string) (string, bool)) (Agent, error) {
	return loadAndFinish(DefaultAgent(), path, env)
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
		c.Thorax.TLS.validatePlaintext(&p, "thorax", "thorax.address", c.Thorax.Address)
	case ModeListen:
		p.listenAddress("listen.address", c.Listen.Address)
		c.Listen.TLS.validate(&p, "listen")
		c.Listen.TLS.validatePlaintext(&p, "listen", "listen.address", c.Listen.Address)
		c.Listen.validateNames(&p)
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
	c.Metrics.validate(&p)
	p.positive("exec.max_concurrent", int64(c.Exec.MaxConcurrent))
	p.positive("exec.output_limit_bytes", int64(c.Exec.OutputLimitBytes))
	if c.Exec.OutputLimitBytes > MaxOutputLimitBytes {
		p.add("exec.output_limit_bytes", "must be at most %d (what Mandible keeps), got %d", MaxOutputLimitBytes, c.Exec.OutputLimitBytes)
	}
	p.required("exec.shell", c.Exec.Shell, "required")
	if c.Exec.WorkingDir != "" && !filepath.IsAbs(c.Exec.WorkingDir) {
		p.add("exec.working_dir", "must be an absolute path, got %q", c.Exec.WorkingDir)
	}
	c.Exec.validatePassEnv(&p)
	if c.Journal.Dir != "" && !filepath.IsAbs(c.Journal.Dir) {
		p.add("journal.dir", "must be an absolute path, got %q", c.Journal.Dir)
	}
	p.durations(c)
	return p.err()
}

// envNamePattern is what a variable named in exec.pass_env may look like.
var envNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// validatePassEnv checks the names of exec.pass_env.
func (e Exec) validatePassEnv(p *problems) {
	for i, n := range e.PassEnv {
		if !envNamePattern.MatchString(n) {
			p.add("exec.pass_env", "name %d must be a variable name (letters, digits, _), got %q", i+1, n)
		}
	}
}

// validateNames checks the client names, if any.
func (l AgentListen) validateNames(p *problems) {
	for i, n := range l.AllowedClientNames {
		if n == "" {
			p.add("listen.allowed_client_names", "name %d is empty", i+1)
		}
	}
}

// String returns the configuration as TOML with its secrets redacted.
func (c Agent) String() string { return render(c) }

// GoString is String, so that %#v does not print secrets either.
func (c Agent) GoString() string { return render(c) }

// LogValue returns the configuration with its secrets redacted.
func (c Agent) LogValue() slog.Value { return logValue(c) }

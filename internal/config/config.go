// Package config holds the typed configuration of each Mantis process:
// Mandible, Thorax and Agent.
//
// Every process reads its configuration the same way: the defaults of
// DefaultMandible, DefaultThorax or DefaultAgent (the only place defaults are
// written), then a TOML file, then environment overrides, then Validate, which
// reports every problem at once, each naming its key.
//
// An environment override is named after the key it replaces: MANTIS_ followed
// by the key's path in upper case with "_" between the parts, for example
// MANTIS_REPLICA_ID, MANTIS_DATABASE_URL, MANTIS_QUEUE_CA_CERT_PATH or
// MANTIS_DISPATCH_POLL_INTERVAL. Lists are comma-separated
// (MANTIS_HTTP_TOKENS=a,b) and tables are comma-separated key=value pairs
// (MANTIS_LABELS=env=prod,zone=a); both replace the file's value entirely.
//
// Secrets (the broker password, HTTP tokens, the analysis model key, the Temporal
// API key and the password inside the database URLs) are redacted by String and
// LogValue, so a configuration can be logged whole. Each secret key has a _file
// sibling (database.url_file, queue.password_file, temporal.api_key_file, ...)
// naming a file that holds the value, as a Kubernetes Secret mounted as files
// provides it: the file's content, its trailing newline trimmed, becomes the value
// (HTTP tokens one a line). Setting a key and its _file sibling is an error.
package config

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Duration is a time.Duration that reads "30s" style strings from TOML and
// from the environment.
type Duration struct{ time.Duration }

// UnmarshalText parses a Go duration string such as "30s" or "10m".
func (d *Duration) UnmarshalText(text []byte) error {
	v, err := time.ParseDuration(string(text))
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

// MarshalText formats the duration the way UnmarshalText reads it.
func (d Duration) MarshalText() ([]byte, error) {
	return []byte(d.String()), nil
}

// Log configures the process's slog handler.
type Log struct {
	// Level is the lowest level logged: debug, info, warn or error.
	Level string `toml:"level"`
	// Format is text (key=value pairs) or json (one JSON object a line).
	Format string `toml:"format"`
}

// Handler returns the slog handler the Log section describes, writing to w.
// It assumes the section has been validated; an unknown level means info.
func (l Log) Handler(w io.Writer) slog.Handler {
	opts := &slog.HandlerOptions{Level: slogLevels[l.Level]}
	if l.Format == "json" {
		return slog.NewJSONHandler(w, opts)
	}
	return slog.NewTextHandler(w, opts)
}

var slogLevels = map[string]slog.Level{
	"debug": slog.LevelDebug,
	"info":  slog.LevelInfo,
	"warn":  slog.LevelWarn,
	"error": slog.LevelError,
}

func defaultLog() Log { return Log{Level: "info", Format: "text"} }

func (l Log) validate(p *problems) {
	if _, ok := slogLevels[l.Level]; !ok {
		p.add("log.level", "must be one of debug, info, warn, error, got %q", l.Level)
	}
	if l.Format != "text" && l.Format != "json" {
		p.add("log.format", "must be text or json, got %q", l.Format)
	}
}

// TLS names the certificate files of one network link. All three paths are
// required unless Insecure is set.
type TLS struct {
	// CACertPath is the CA certificate (PEM) that signs the peer's certificate;
	// required unless Insecure is set.
	CACertPath string `toml:"ca_cert_path"`
	// CertPath is this process's own certificate (PEM), presented to the peer;
	// required unless Insecure is set.
	CertPath string `toml:"cert_path"`
	// KeyPath is the private key (PEM) of CertPath; required unless Insecure is set.
	KeyPath string `toml:"key_path"`
	// Insecure is the explicit development switch for plaintext: no
	// certificates are loaded and none are required, so the link has no
	// identities. It is refused unless the link's address is loopback, or
	// InsecureAllowRemote is set too.
	Insecure bool `toml:"insecure"`
	// InsecureAllowRemote permits Insecure on an address that is not loopback.
	// Unsafe: whoever reaches the address (or sits on the path) speaks for the
	// other side with no certificate, and everything crosses in clear; a
	// listen agent's port becomes a remote shell. The process logs a warning
	// when it is used.
	InsecureAllowRemote bool `toml:"insecure_allow_remote"`
}

func (t TLS) validate(p *problems, section string) {
	if t.Insecure {
		return
	}
	why := "required unless " + section + ".insecure = true"
	p.required(section+".ca_cert_path", t.CACertPath, why)
	p.required(section+".cert_path", t.CertPath, why)
	p.required(section+".key_path", t.KeyPath, why)
}

// Listener is a server socket and the TLS it serves with.
type Listener struct {
	// Listen is the host:port the server listens on.
	Listen string `toml:"listen"`
	TLS
}

func (l Listener) validate(p *problems, section string) {
	p.listenAddress(section+".listen", l.Listen)
	l.TLS.validate(p, section)
	l.TLS.validatePlaintext(p, section, section+".listen", l.Listen)
}

// Endpoint is an address to dial or to listen on, with its TLS.
type Endpoint struct {
	// Address is the host:port to call, or for a listen-mode agent the host:port
	// to listen on.
	Address string `toml:"address"`
	TLS
}

// Queue is the RabbitMQ connection: the [queue] keys, the same in
// mandible.toml and thorax.toml. The broker speaks only amqps.
type Queue struct {
	// Enabled turns the broker on. When false the process runs without
	// RabbitMQ (Thorax then polls Mandible for work).
	Enabled bool `toml:"enabled"`
	// Host is the broker's host name or address; required when enabled.
	Host string `toml:"host"`
	// Port is the broker's AMQPS port: the broker is reached over TLS only.
	Port int `toml:"port"`
	// Username is the broker user; required when enabled.
	Username string `toml:"username"`
	// Password is the broker user's password; required when enabled.
	Password string `toml:"password" secret:"true"`
	// PasswordFile is a file holding Password (a mounted Secret).
	PasswordFile string `toml:"password_file" secretfile:"password"`
	// VHost is the virtual host of Mantis's exchanges and queues. The broker's
	// own "/" gives Mantis's users no permissions.
	VHost string `toml:"vhost"`
	// CACertPath is the CA that signs the broker's certificate; mandatory when
	// the queue is enabled.
	CACertPath string `toml:"ca_cert_path"`
	// ClientCertPath is the client certificate presented to the broker, set
	// together with ClientKeyPath or not at all; the shipped broker sets
	// fail_if_no_peer_cert, so it needs both.
	ClientCertPath string `toml:"client_cert_path"`
	// ClientKeyPath is the private key of ClientCertPath.
	ClientKeyPath string `toml:"client_key_path"`
}

func defaultQueue() Queue { return Queue{Port: 5671, VHost: "/mantis"} }

// URL returns the amqps URL of the broker, password included. Do not log it.
func (q Queue) URL() string {
	return "amqps://" + url.UserPassword(q.Username, q.Password).String() + "@" +
		net.JoinHostPort(q.Host, strconv.Itoa(q.Port)) + "/" + url.PathEscape(q.VHost)
}

// String returns the section with the password redacted.
func (q Queue) String() string { return render(q) }

// GoString is String, so that %#v does not print secrets either.
func (q Queue) GoString() string { return render(q) }

// LogValue returns the section with the password redacted.
func (q Queue) LogValue() slog.Value { return logValue(q) }

func (q Queue) validate(p *problems) {
	if !q.Enabled {
		return
	}
	const why = "required when queue.enabled = true"
	p.required("queue.host", q.Host, why)
	if q.Port < 1 || q.Port > 65535 {
		p.add("queue.port", "must be 1-65535, got %d", q.Port)
	}
	p.required("queue.username", q.Username, why)
	p.required("queue.password", q.Password, why)
	p.required("queue.vhost", q.VHost, why)
	p.required("queue.ca_cert_path", q.CACertPath, why)
	switch {
	case q.ClientCertPath != "" && q.ClientKeyPath == "":
		p.add("queue.client_key_path", "required when queue.client_cert_path is set (set both or neither)")
	case q.ClientCertPath == "" && q.ClientKeyPath != "":
		p.add("queue.client_cert_path", "required when queue.client_key_path is set (set both or neither)")
	}
}

// ThoraxQueue is Thorax's [queue] section: the shared keys plus the
// consumer prefetch.
type ThoraxQueue struct {
	Queue
	// PrefetchCount is the number of unacknowledged messages per consumer, 1 to
	// 65535. Lower-priority messages wait in Thorax's buffers while higher ones
	// run, so keep it small.
	PrefetchCount int `toml:"prefetch_count"`
}

// String returns the section with the password redacted.
func (q ThoraxQueue) String() string { return render(q) }

// GoString is String, so that %#v does not print secrets either.
func (q ThoraxQueue) GoString() string { return render(q) }

// LogValue returns the section with the password redacted.
func (q ThoraxQueue) LogValue() slog.Value { return logValue(q) }

func (q ThoraxQueue) validate(p *problems) {
	q.Queue.validate(p)
	if q.Enabled && (q.PrefetchCount < 1 || q.PrefetchCount > 65535) {
		p.add("queue.prefetch_count", "must be 1-65535, got %d", q.PrefetchCount)
	}
}

// FieldError is one configuration problem: the key (or environment
// variable) and what is wrong with it.
type FieldError struct {
	Key     string
	Problem string
}

// Error returns "<key>: <problem>".
func (e *FieldError) Error() string { return e.Key + ": " + e.Problem }

// Errors is every problem found while loading or validating a
// configuration, one per line.
type Errors []error

// Error returns every problem, one per line.
func (e Errors) Error() string {
	lines := make([]string, len(e))
	for i, err := range e {
		lines[i] = err.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap lets errors.Is and errors.As see each problem.
func (e Errors) Unwrap() []error { return e }

// problems collects validation failures.
type problems struct{ errs Errors }

func (p *problems) add(key, format string, args ...any) {
	p.errs = append(p.errs, &FieldError{Key: key, Problem: fmt.Sprintf(format, args...)})
}

func (p *problems) required(key, value, why string) {
	if value == "" {
		p.add(key, "%s", why)
	}
}

func (p *problems) positive(key string, v int64) {
	if v <= 0 {
		p.add(key, "must be positive, got %d", v)
	}
}

// listenAddress checks a host:port to listen on; the host may be empty and
// the port 0 (any free port).
func (p *problems) listenAddress(key, addr string) { p.address(key, addr, 0) }

// dialAddress checks a host:port to connect to.
func (p *problems) dialAddress(key, addr string) { p.address(key, addr, 1) }

func (p *problems) address(key, addr string, minPort int) {
	if addr == "" {
		p.add(key, "required")
		return
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		p.add(key, "must be host:port, got %q", addr)
		return
	}
	if minPort > 0 && host == "" {
		p.add(key, "must name a host, got %q", addr)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < minPort || n > 65535 {
		p.add(key, "port must be %d-65535, got %q", minPort, port)
	}
}

func (p *problems) err() error {
	if len(p.errs) == 0 {
		return nil
	}
	return p.errs
}

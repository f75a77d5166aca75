package config

import (
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Mandible is the configuration of the control plane (mandible.toml).
type Mandible struct {
	// ReplicaID names this replica in claims (claimed_by), its dispatcher
	// workflow and its task queue; unique among running replicas, it matches
	// `[A-Za-z0-9._-]{1,64}`.
	ReplicaID string `toml:"replica_id"`
	// Log is the process's log output, on standard error.
	Log Log `toml:"log"`
	// Database is Mandible's PostgreSQL, which it owns alone.
	Database Database `toml:"database"`
	// Temporal is the Temporal frontend Mandible's workers and client use, and
	// the payload codec's keys.
	Temporal Temporal `toml:"temporal"`
	// HTTP is the server of the JSON API, the event streams (/sse), the console,
	// /healthz, /readyz and /metrics.
	HTTP HTTP `toml:"http"`
	// SSE bounds the event streams served under /sse.
	SSE SSE `toml:"sse"`
	// GRPC is the server Thorax instances call, with mutual TLS.
	GRPC Listener `toml:"grpc"`
	// Queue is the RabbitMQ broker, which carries the nudges that tell Thorax
	// a command waits. Mandible declares the exchanges and queues.
	Queue Queue `toml:"queue"`
	// Dispatch tunes the claim loop over pending dispatch requests.
	Dispatch Dispatch `toml:"dispatch"`
	// Thorax is how Mandible judges Thorax instances, and which targets each
	// Thorax certificate may serve.
	Thorax ThoraxHealth `toml:"thorax"`
	// Analysis is the model that explains failed commands; off while
	// analysis.model_url is empty.
	Analysis Analysis `toml:"analysis"`
	// Secrets is where the file: references of a step's env_secret resolve.
	Secrets Secrets `toml:"secrets"`
	// Tracing sends OpenTelemetry spans; off while tracing.endpoint is empty.
	Tracing Tracing `toml:"tracing"`
	// Output bounds the live output of commands Mandible stores.
	Output Output `toml:"output"`
	// Retention prunes the event log and the live output.
	Retention Retention `toml:"retention"`
	// Debug serves Go profiles when debug.pprof_listen is set.
	Debug Debug `toml:"debug"`
}

// Database is Mandible's PostgreSQL connection.
type Database struct {
	// URL is a postgres:// or postgresql:// connection URL; required. It may lead
	// to a connection pooler (PgBouncer in transaction mode): what needs a session
	// of its own uses DirectURL. The plain DATABASE_URL variable is read too, but
	// only when neither the file nor MANTIS_DATABASE_URL sets the key.
	URL string `toml:"url" secret:"url"`
	// URLFile is a file holding the URL (a mounted Secret); set one of the two.
	URLFile string `toml:"url_file" secretfile:"url"`
	// DirectURL reaches PostgreSQL itself, without a pooler in between: LISTEN
	// (dispatch wake-ups, result and SSE notifications) and the migrations'
	// advisory lock need a session. Empty means URL.
	DirectURL string `toml:"direct_url" secret:"url"`
	// DirectURLFile is a file holding DirectURL.
	DirectURLFile string `toml:"direct_url_file" secretfile:"direct_url"`
	// QueryExecMode is how pgx sends queries over the pooled connections (pgx's
	// default_query_exec_mode): auto, cache_statement, cache_describe,
	// describe_exec, exec or simple_protocol. Auto picks cache_statement against
	// PostgreSQL itself and cache_describe when DirectURL differs from the URL,
	// which a transaction pooler needs (it cannot keep a session's prepared
	// statements).
	QueryExecMode string `toml:"query_exec_mode"`
	// MaxConns is the size of the connection pool.
	MaxConns int `toml:"max_conns"`
}

// Query execution modes of database.query_exec_mode: QueryExecModeAuto, or one of
// pgx's default_query_exec_mode values.
const (
	QueryExecModeAuto           = "auto"
	QueryExecModeCacheStatement = "cache_statement"
	QueryExecModeCacheDescribe  = "cache_describe"
	QueryExecModeDescribeExec   = "describe_exec"
	QueryExecModeExec           = "exec"
	QueryExecModeSimpleProtocol = "simple_protocol"
)

// queryExecModes are the values database.query_exec_mode accepts.
var queryExecModes = []string{QueryExecModeAuto, QueryExecModeCacheStatement, QueryExecModeCacheDescribe,
	QueryExecModeDescribeExec, QueryExecModeExec, QueryExecModeSimpleProtocol}

// Direct returns the URL of a connection that needs a session of its own: DirectURL,
// or URL when it is empty.
func (d Database) Direct() string {
	if d.DirectURL != "" {
		return d.DirectURL
	}
	return d.URL
}

// Pooled reports whether URL leads somewhere else than PostgreSQL itself (a pooler):
// DirectURL is set and differs from it.
func (d Database) Pooled() bool { return d.DirectURL != "" && d.DirectURL != d.URL }

// ExecMode returns the query execution mode for URL, QueryExecModeAuto resolved:
// cache_describe behind a pooler, cache_statement otherwise. A transaction pooler
// (PgBouncer before 1.21, or without max_prepared_statements) hands each transaction
// any server connection, where the named statements cache_statement prepared on
// another are missing. Cache_describe keeps only the statements' descriptions, in the
// client, and runs each query in one round trip with the unnamed statement;
// describe_exec would take two round trips, which the pooler may send to two server
// connections.
func (d Database) ExecMode() string {
	if d.QueryExecMode != QueryExecModeAuto && d.QueryExecMode != "" {
		return d.QueryExecMode
	}
	if d.Pooled() {
		return QueryExecModeCacheDescribe
	}
	return QueryExecModeCacheStatement
}

// String returns the section with the URL's password redacted.
func (d Database) String() string { return render(d) }

// GoString is String, so that %#v does not print secrets either.
func (d Database) GoString() string { return render(d) }

// LogValue returns the section with the URL's password redacted.
func (d Database) LogValue() slog.Value { return logValue(d) }

// Dispatch tunes the claim loop over pending_dispatch_requests.
type Dispatch struct {
	// PollInterval is the fallback claim tick; a new request wakes the replicas
	// at once.
	PollInterval Duration `toml:"poll_interval"`
	// ProcessingTimeout is how long a claimed row may stay in processing
	// without a live holder before it is reclaimed. A replica silent for half of
	// it is gone, and its dispatcher workflow is terminated.
	ProcessingTimeout Duration `toml:"processing_timeout"`
	// DeliveryTimeout is how long a written command may wait for a Thorax to
	// claim it; past it the delivery counts as failed and the request is
	// retried (attempts + 1, with backoff).
	DeliveryTimeout Duration `toml:"delivery_timeout"`
	// BatchSize is the most rows one claim takes, 1 to 10000: Temporal costs per
	// batch, so batches are large.
	BatchSize int `toml:"batch_size"`
}

// ThoraxHealth is how Mandible judges Thorax instances.
type ThoraxHealth struct {
	// HeartbeatTimeout is the silence after which a Thorax instance is dead: its
	// targets are reassigned and their in-flight deployments marked failed. No
	// instance is declared dead within this long of Mandible's start or recovery.
	HeartbeatTimeout Duration `toml:"heartbeat_timeout"`
	// ResultGrace is how long past its timeout a running command may go without a
	// result before Mandible fails it ("no result within timeout + grace").
	ResultGrace Duration `toml:"result_grace"`
	// Scopes names, per Thorax certificate name, the targets that certificate may
	// serve: selectors separated by spaces, each a target name pattern (* and ?) or
	// label=value (a label an admin set, never one an agent reports). A certificate
	// listed serves only the targets some selector matches; keep the same scopes on
	// every replica.
	Scopes map[string]string `toml:"scopes"`
	// ScopedOnly makes a certificate that thorax.scopes does not list serve no
	// target.
	ScopedOnly bool `toml:"scoped_only"`
}

// ThoraxScope is the targets one Thorax certificate may serve: those whose name
// matches a pattern of Names, and those whose labels hold every pair of one of Labels.
type ThoraxScope struct {
	Names  []string
	Labels []map[string]string
}

// ScopeOf returns the scope of the Thorax certificate named cert, and false when it
// may serve every target (not listed, and ScopedOnly off). A certificate not listed
// under ScopedOnly gets the empty scope, which serves nothing.
func (t ThoraxHealth) ScopeOf(cert string) (ThoraxScope, bool) {
	spec, listed := t.Scopes[cert]
	if !listed {
		return ThoraxScope{}, t.ScopedOnly
	}
	scope, _ := parseScope(spec)
	return scope, true
}

// scopePattern is what a target name pattern may hold: a target name's
// characters and the wildcards.
var scopePattern = regexp.MustCompile(`^[A-Za-z0-9._*?-]{1,128}$`)

// parseScope reads a scope's selectors, and the problem of each that does not parse.
func parseScope(spec string) (ThoraxScope, []string) {
	var s ThoraxScope
	var bad []string
	for _, sel := range strings.Fields(spec) {
		if k, v, ok := strings.Cut(sel, "="); ok {
			if !namePattern.MatchString(k) || v == "" {
				bad = append(bad, fmt.Sprintf("%q is not label=value", sel))
				continue
			}
			s.Labels = append(s.Labels, map[string]string{k: v})
			continue
		}
		if !scopePattern.MatchString(sel) {
			bad = append(bad, fmt.Sprintf("%q is not a target name pattern (letters, digits, . _ - and the wildcards * ?)", sel))
			continue
		}
		s.Names = append(s.Names, sel)
	}
	return s, bad
}

func (t ThoraxHealth) validate(p *problems) {
	for cert, spec := range t.Scopes {
		key := "thorax.scopes." + cert
		if !namePattern.MatchString(cert) {
			p.add(key, "must name a certificate (%s)", namePattern)
		}
		if _, bad := parseScope(spec); len(bad) > 0 {
			p.add(key, "%s", strings.Join(bad, "; "))
		}
	}
}

// Analysis is the model that explains failures; off when ModelURL is empty.
type Analysis struct {
	// ModelURL is the http:// or https:// endpoint of the model; analysis is off
	// while it is empty.
	ModelURL string `toml:"model_url"`
	// ModelKey is the API key sent to the model.
	ModelKey string `toml:"model_key" secret:"true"`
	// ModelKeyFile is a file holding ModelKey.
	ModelKeyFile string `toml:"model_key_file" secretfile:"model_key"`
	// Model is the model's name; required when ModelURL is set.
	Model string `toml:"model"`
	// Timeout bounds one analysis request.
	Timeout Duration `toml:"timeout"`
}

// Enabled reports whether failure analysis is configured.
func (a Analysis) Enabled() bool { return a.ModelURL != "" }

// String returns the section with the model key redacted.
func (a Analysis) String() string { return render(a) }

// GoString is String, so that %#v does not print secrets either.
func (a Analysis) GoString() string { return render(a) }

// LogValue returns the section with the model key redacted.
func (a Analysis) LogValue() slog.Value { return logValue(a) }

// DefaultMandible returns Mandible's defaults. The database URL and the HTTP
// tokens have none and must be configured.
func DefaultMandible() Mandible {
	return Mandible{
		ReplicaID: defaultReplicaID(),
		Log:       defaultLog(),
		Database:  Database{MaxConns: 10, QueryExecMode: QueryExecModeAuto},
		Temporal: Temporal{Address: "127.0.0.1:7233", Namespace: "default", DeploymentTaskQueue: "mantis-deployments",
			SearchAttributes: SearchAttributesRegister, SearchAttributesWait: Duration{DefaultSearchAttributesWait}},
		HTTP:  defaultHTTP(),
		SSE:   defaultSSE(),
		GRPC:  Listener{Listen: "127.0.0.1:9090"},
		Queue: defaultQueue(),
		Dispatch: Dispatch{
			PollInterval:      Duration{30 * time.Second},
			ProcessingTimeout: Duration{300 * time.Second},
			DeliveryTimeout:   Duration{60 * time.Second},
			BatchSize:         500,
		},
		Thorax:    ThoraxHealth{HeartbeatTimeout: Duration{15 * time.Second}, ResultGrace: Duration{2 * time.Minute}},
		Analysis:  Analysis{Timeout: Duration{10 * time.Second}},
		Output:    defaultOutput(),
		Retention: defaultRetention(),
	}
}

// LoadMandible returns Mandible's configuration: the defaults, then the TOML
// file at path (none when path is ""), then the MANTIS_ variables env
// defines (os.LookupEnv in production; nil for none), validated.
//
// The plain DATABASE_URL variable is honoured as well, but only when neither
// MANTIS_DATABASE_URL nor the file sets database.url: a generic variable
// left in the environment must not beat an explicit Mantis setting.
func LoadMandible(path string, env func(string) (string, bool)) (Mandible, error) {
	cfg := DefaultMandible()
	fileSets, errs, err := load(&cfg, path, env)
	if err != nil {
		return Mandible{}, err
	}
	if env != nil && !fileSets("database", "url") && cfg.Database.URLFile == "" {
		if _, ok := env("MANTIS_DATABASE_URL"); !ok {
			if u, ok := env("DATABASE_URL"); ok {
				cfg.Database.URL = u
			}
		}
	}
	errs = append(errs, readSecretFiles(&cfg)...)
	return finish(cfg, errs)
}

// Validate reports every problem of the configuration at once.
func (c Mandible) Validate() error {
	var p problems
	p.name("replica_id", c.ReplicaID)
	c.Log.validate(&p)

	c.Database.validate(&p)

	c.Temporal.validate(&p)
	c.Secrets.validate(&p)

	c.HTTP.validate(&p)
	c.SSE.validate(&p, c.HTTP.MaxConnections)

	c.GRPC.validate(&p, "grpc")
	c.Queue.validate(&p)

	p.positive("dispatch.batch_size", int64(c.Dispatch.BatchSize))
	if c.Dispatch.BatchSize > 10000 {
		p.add("dispatch.batch_size", "must be at most 10000, got %d", c.Dispatch.BatchSize)
	}

	if c.Analysis.Enabled() {
		if u, err := url.Parse(c.Analysis.ModelURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			p.add("analysis.model_url", "must be an http:// or https:// URL")
		}
		p.required("analysis.model", c.Analysis.Model, "required when analysis.model_url is set")
	}

	c.Thorax.validate(&p)
	c.Output.validate(&p)
	c.Debug.validate(&p)
	p.durations(c)
	return p.err()
}

// String returns the configuration as TOML with its secrets redacted.
func (c Mandible) String() string { return render(c) }

// GoString is String, so that %#v does not print secrets either.
func (c Mandible) GoString() string { return render(c) }

// LogValue returns the configuration with its secrets redacted.
func (c Mandible) LogValue() slog.Value { return logValue(c) }

func (d Database) validate(p *problems) {
	if d.URL == "" && d.URLFile == "" {
		p.add("database.url", "required")
	} else if d.URL != "" {
		postgresURL(p, "database.url", d.URL)
	}
	if d.DirectURL != "" {
		postgresURL(p, "database.direct_url", d.DirectURL)
	}
	if !slices.Contains(queryExecModes, d.QueryExecMode) {
		p.add("database.query_exec_mode", "must be one of %s, got %q", strings.Join(queryExecModes, ", "), d.QueryExecMode)
	}
	p.positive("database.max_conns", int64(d.MaxConns))
}

// postgresURL checks that s is a postgres:// or postgresql:// URL without repeating
// it: a parse error would quote the password.
func postgresURL(p *problems, key, s string) {
	if u, err := url.Parse(s); err != nil {
		p.add(key, "must be a postgres:// or postgresql:// URL, and this one does not parse")
	} else if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		p.add(key, "must be a postgres:// or postgresql:// URL, got scheme %q", u.Scheme)
	}
}

package config_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/config"
)

const token = "0123456789abcdef-token"

// env turns a map into the lookup Load* takes.
func env(vars map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

// writeFile writes a TOML file into a fresh temporary directory.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

// problems returns the lines of a validation error, sorted.
func problems(t *testing.T, err error) []string {
	t.Helper()
	require.Error(t, err)
	var errs config.Errors
	require.ErrorAs(t, err, &errs)
	lines := make([]string, len(errs))
	for i, e := range errs {
		lines[i] = e.Error()
	}
	slices.Sort(lines)
	return lines
}

func tlsFiles(name string) config.TLS {
	return config.TLS{
		CACertPath: "/certs/ca.crt",
		CertPath:   "/certs/" + name + ".crt",
		KeyPath:    "/certs/" + name + ".key",
	}
}

func enabledQueue() config.Queue {
	q := config.DefaultMandible().Queue
	q.Enabled = true
	q.Host = "rabbitmq"
	q.Username = "mantis"
	q.Password = "broker-secret"
	q.CACertPath = "/certs/ca.crt"
	q.ClientCertPath = "/certs/client.crt"
	q.ClientKeyPath = "/certs/client.key"
	return q
}

func validMandible() config.Mandible {
	c := config.DefaultMandible()
	c.Database.URL = "postgres://mantis:db-secret@db:5432/mantis"
	c.HTTP.Tokens = []string{token}
	c.GRPC.TLS = tlsFiles("mandible")
	c.Queue = enabledQueue()
	return c
}

func validThorax() config.Thorax {
	c := config.DefaultThorax()
	c.Mandible.TLS = tlsFiles("thorax")
	c.Agents.TLS = tlsFiles("thorax")
	c.Queue.Queue = enabledQueue()
	return c
}

func validAgent(mode string) config.Agent {
	c := config.DefaultAgent()
	c.Name = "web-1"
	c.Mode = mode
	c.Thorax.Address = "thorax:9190"
	c.Thorax.TLS = tlsFiles("agent")
	c.Listen.Address = ":9191"
	c.Listen.TLS = tlsFiles("agent")
	return c
}

func TestDefaults(t *testing.T) {
	t.Parallel()

	m := config.DefaultMandible()
	require.Equal(t, 5671, m.Queue.Port)
	require.Equal(t, "/mantis", m.Queue.VHost)
	require.False(t, m.Queue.Enabled)
	require.Equal(t, 30*time.Second, m.Dispatch.PollInterval.Duration)
	require.Equal(t, 300*time.Second, m.Dispatch.ProcessingTimeout.Duration)
	require.Equal(t, 60*time.Second, m.Dispatch.DeliveryTimeout.Duration)
	require.Equal(t, 500, m.Dispatch.BatchSize)
	require.Equal(t, 15*time.Second, m.Thorax.HeartbeatTimeout.Duration)
	require.Equal(t, int64(1<<20), m.HTTP.MaxBodyBytes)
	require.Equal(t, "127.0.0.1:7233", m.Temporal.Address)
	require.Equal(t, "default", m.Temporal.Namespace)
	require.Regexp(t, `^[A-Za-z0-9._-]{1,64}$`, m.ReplicaID)
	require.True(t, strings.HasSuffix(m.ReplicaID, fmt.Sprintf("-%d", os.Getpid())), m.ReplicaID)
	require.False(t, m.Analysis.Enabled())

	th := config.DefaultThorax()
	require.Equal(t, 10, th.Queue.PrefetchCount)
	require.Equal(t, 5671, th.Queue.Port)
	require.Equal(t, "127.0.0.1:9190", th.Agents.Listen)
	require.Equal(t, "127.0.0.1:9090", th.Mandible.Address)
	require.NotEmpty(t, th.Name)

	a := config.DefaultAgent()
	require.Equal(t, 4, a.Exec.MaxConcurrent)
	require.Equal(t, 10*time.Minute, a.Exec.DefaultTimeout.Duration)
	require.Equal(t, 64<<10, a.Exec.OutputLimitBytes)
	require.Equal(t, "/bin/sh", a.Exec.Shell)
}

// The defaults leave out exactly what has no sensible default; with that
// supplied they validate.
func TestDefaultsValidateWhereTheyShould(t *testing.T) {
	t.Parallel()

	require.Equal(t, []string{
		"database.url: required",
		"grpc.ca_cert_path: required unless grpc.insecure = true",
		"grpc.cert_path: required unless grpc.insecure = true",
		"grpc.key_path: required unless grpc.insecure = true",
		"http.token_file: required (or the deprecated http.tokens)",
	}, problems(t, config.DefaultMandible().Validate()))

	require.Equal(t, []string{
		"agents.ca_cert_path: required unless agents.insecure = true",
		"agents.cert_path: required unless agents.insecure = true",
		"agents.key_path: required unless agents.insecure = true",
		"mandible.ca_cert_path: required unless mandible.insecure = true",
		"mandible.cert_path: required unless mandible.insecure = true",
		"mandible.key_path: required unless mandible.insecure = true",
	}, problems(t, config.DefaultThorax().Validate()))

	require.Equal(t, []string{
		"mode: required (poll or listen)",
		"name: required",
	}, problems(t, config.DefaultAgent().Validate()))

	// Explicit development mode needs no certificates at all.
	m := config.DefaultMandible()
	m.Database.URL = "postgresql:///mantis?host=/run/postgresql"
	m.HTTP.Tokens = []string{token}
	m.GRPC.Insecure = true
	require.NoError(t, m.Validate())

	th := config.DefaultThorax()
	th.Mandible.Insecure = true
	th.Agents.Insecure = true
	require.NoError(t, th.Validate())

	require.NoError(t, validMandible().Validate())
	require.NoError(t, validThorax().Validate())
	require.NoError(t, validAgent(config.ModePoll).Validate())
	require.NoError(t, validAgent(config.ModeListen).Validate())
}

func TestEachProblemNamesItsKey(t *testing.T) {
	t.Parallel()

	mandible := []struct {
		change func(*config.Mandible)
		want   string
	}{
		{func(c *config.Mandible) { c.ReplicaID = "" }, "replica_id: required"},
		{func(c *config.Mandible) { c.ReplicaID = "a b" }, `replica_id: must match ^[A-Za-z0-9._-]{1,64}$, got "a b"`},
		{func(c *config.Mandible) { c.Log.Level = "loud" }, `log.level: must be one of debug, info, warn, error, got "loud"`},
		{func(c *config.Mandible) { c.Log.Format = "xml" }, `log.format: must be text or json, got "xml"`},
		{func(c *config.Mandible) { c.Database.URL = "" }, "database.url: required"},
		{func(c *config.Mandible) { c.Database.URL = "mysql://u:db-secret@h/db" }, `database.url: must be a postgres:// or postgresql:// URL, got scheme "mysql"`},
		{func(c *config.Mandible) { c.Database.URL = "postgres://u:db-secret@h:port/db" }, "database.url: must be a postgres:// or postgresql:// URL, and this one does not parse"},
		{func(c *config.Mandible) { c.Database.MaxConns = 0 }, "database.max_conns: must be positive, got 0"},
		{func(c *config.Mandible) { c.Temporal.Address = "temporal" }, `temporal.address: must be host:port, got "temporal"`},
		{func(c *config.Mandible) { c.Temporal.Namespace = "" }, "temporal.namespace: required"},
		{func(c *config.Mandible) { c.HTTP.Listen = "" }, "http.listen: required"},
		{func(c *config.Mandible) { c.HTTP.Tokens = nil }, "http.token_file: required (or the deprecated http.tokens)"},
		{func(c *config.Mandible) { c.HTTP.Tokens = []string{token, "short"} }, "http.tokens: token 2 must be at least 16 characters, got 5"},
		{func(c *config.Mandible) { c.HTTP.MaxBodyBytes = -1 }, "http.max_body_bytes: must be positive, got -1"},
		{func(c *config.Mandible) { c.GRPC.Listen = "9090" }, `grpc.listen: must be host:port, got "9090"`},
		{func(c *config.Mandible) { c.GRPC.CACertPath = "" }, "grpc.ca_cert_path: required unless grpc.insecure = true"},
		{func(c *config.Mandible) { c.GRPC.CertPath = "" }, "grpc.cert_path: required unless grpc.insecure = true"},
		{func(c *config.Mandible) { c.GRPC.KeyPath = "" }, "grpc.key_path: required unless grpc.insecure = true"},
		{func(c *config.Mandible) { c.Queue.Host = "" }, "queue.host: required when queue.enabled = true"},
		{func(c *config.Mandible) { c.Queue.Port = 0 }, "queue.port: must be 1-65535, got 0"},
		{func(c *config.Mandible) { c.Queue.Username = "" }, "queue.username: required when queue.enabled = true"},
		{func(c *config.Mandible) { c.Queue.Password = "" }, "queue.password: required when queue.enabled = true"},
		{func(c *config.Mandible) { c.Queue.VHost = "" }, "queue.vhost: required when queue.enabled = true"},
		{func(c *config.Mandible) { c.Queue.CACertPath = "" }, "queue.ca_cert_path: required when queue.enabled = true"},
		{func(c *config.Mandible) { c.Queue.ClientKeyPath = "" }, "queue.client_key_path: required when queue.client_cert_path is set (set both or neither)"},
		{func(c *config.Mandible) { c.Queue.ClientCertPath = "" }, "queue.client_cert_path: required when queue.client_key_path is set (set both or neither)"},
		{func(c *config.Mandible) { c.Dispatch.PollInterval.Duration = -time.Second }, "dispatch.poll_interval: must be positive, got -1s"},
		{func(c *config.Mandible) { c.Dispatch.BatchSize = 0 }, "dispatch.batch_size: must be positive, got 0"},
		{func(c *config.Mandible) { c.Dispatch.BatchSize = 20000 }, "dispatch.batch_size: must be at most 10000, got 20000"},
		{func(c *config.Mandible) { c.Thorax.HeartbeatTimeout.Duration = 0 }, "thorax.heartbeat_timeout: must be positive, got 0s"},
		{func(c *config.Mandible) { c.Analysis.ModelURL = "https://models.example/v1" }, "analysis.model: required when analysis.model_url is set"},
		{func(c *config.Mandible) { c.Analysis.ModelURL, c.Analysis.Model = "models.example", "m" }, "analysis.model_url: must be an http:// or https:// URL"},
		{func(c *config.Mandible) { c.Analysis.Timeout.Duration = 0 }, "analysis.timeout: must be positive, got 0s"},
	}
	for _, tc := range mandible {
		c := validMandible()
		tc.change(&c)
		require.Equal(t, []string{tc.want}, problems(t, c.Validate()))
	}

	thorax := []struct {
		change func(*config.Thorax)
		want   string
	}{
		{func(c *config.Thorax) { c.Name = "" }, "name: required"},
		{func(c *config.Thorax) { c.Mandible.Address = ":9090" }, `mandible.address: must name a host, got ":9090"`},
		{func(c *config.Thorax) { c.Mandible.CACertPath = "" }, "mandible.ca_cert_path: required unless mandible.insecure = true"},
		{func(c *config.Thorax) { c.Mandible.KeyPath = "" }, "mandible.key_path: required unless mandible.insecure = true"},
		{func(c *config.Thorax) { c.Queue.PrefetchCount = 0 }, "queue.prefetch_count: must be 1-65535, got 0"},
		{func(c *config.Thorax) { c.Queue.PrefetchCount = 70000 }, "queue.prefetch_count: must be 1-65535, got 70000"},
		{func(c *config.Thorax) { c.Queue.CACertPath = "" }, "queue.ca_cert_path: required when queue.enabled = true"},
		{func(c *config.Thorax) { c.Polling.FallbackInterval.Duration = 0 }, "polling.fallback_interval: must be positive, got 0s"},
		{func(c *config.Thorax) { c.Heartbeat.Interval.Duration = -time.Second }, "heartbeat.interval: must be positive, got -1s"},
		{func(c *config.Thorax) { c.Agents.Listen = "localhost" }, `agents.listen: must be host:port, got "localhost"`},
		{func(c *config.Thorax) { c.Agents.CertPath = "" }, "agents.cert_path: required unless agents.insecure = true"},
	}
	for _, tc := range thorax {
		c := validThorax()
		tc.change(&c)
		require.Equal(t, []string{tc.want}, problems(t, c.Validate()))
	}

	agent := []struct {
		mode   string
		change func(*config.Agent)
		want   string
	}{
		{config.ModePoll, func(c *config.Agent) { c.Name = "" }, "name: required"},
		{config.ModePoll, func(c *config.Agent) { c.Mode = "push" }, `mode: must be poll or listen, got "push"`},
		{config.ModePoll, func(c *config.Agent) { c.Thorax.Address = "" }, "thorax.address: required"},
		{config.ModePoll, func(c *config.Agent) { c.Thorax.CACertPath = "" }, "thorax.ca_cert_path: required unless thorax.insecure = true"},
		{config.ModeListen, func(c *config.Agent) { c.Listen.Address = "" }, "listen.address: required"},
		{config.ModeListen, func(c *config.Agent) { c.Listen.Address = "[::1]:99999" }, `listen.address: port must be 0-65535, got "99999"`},
		{config.ModeListen, func(c *config.Agent) { c.Listen.KeyPath = "" }, "listen.key_path: required unless listen.insecure = true"},
		{config.ModePoll, func(c *config.Agent) { c.Exec.MaxConcurrent = 0 }, "exec.max_concurrent: must be positive, got 0"},
		{config.ModePoll, func(c *config.Agent) { c.Exec.OutputLimitBytes = 0 }, "exec.output_limit_bytes: must be positive, got 0"},
		{config.ModePoll, func(c *config.Agent) { c.Exec.Shell = "" }, "exec.shell: required"},
		{config.ModePoll, func(c *config.Agent) { c.Exec.DefaultTimeout.Duration = 0 }, "exec.default_timeout: must be positive, got 0s"},
	}
	for _, tc := range agent {
		c := validAgent(tc.mode)
		tc.change(&c)
		require.Equal(t, []string{tc.want}, problems(t, c.Validate()))
	}
}

// Only the section of the agent's own mode is checked.
func TestAgentChecksOnlyItsMode(t *testing.T) {
	t.Parallel()

	poll := validAgent(config.ModePoll)
	poll.Listen = config.AgentListen{}
	require.NoError(t, poll.Validate())

	listen := validAgent(config.ModeListen)
	listen.Thorax = config.Endpoint{}
	require.NoError(t, listen.Validate())
}

func TestAllProblemsReportedAtOnce(t *testing.T) {
	t.Parallel()

	c := validMandible()
	c.Database.URL = ""
	c.Queue.Port = 0
	c.Queue.CACertPath = ""
	c.Dispatch.PollInterval.Duration = -time.Second
	c.HTTP.Tokens = []string{"short"}

	err := c.Validate()
	require.Equal(t, []string{
		"database.url: required",
		"dispatch.poll_interval: must be positive, got -1s",
		"http.tokens: token 1 must be at least 16 characters, got 5",
		"queue.ca_cert_path: required when queue.enabled = true",
		"queue.port: must be 1-65535, got 0",
	}, problems(t, err))

	var fe *config.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "database.url", fe.Key)
}

func TestQueueCARule(t *testing.T) {
	t.Parallel()

	c := validMandible()
	c.Queue.CACertPath = ""
	require.Equal(t, []string{"queue.ca_cert_path: required when queue.enabled = true"}, problems(t, c.Validate()))

	// Nothing about the broker is checked while it is off.
	c.Queue = config.Queue{}
	require.NoError(t, c.Validate())

	// The client pair is optional, but only as a pair.
	c.Queue = enabledQueue()
	c.Queue.ClientCertPath, c.Queue.ClientKeyPath = "", ""
	require.NoError(t, c.Validate())

	th := validThorax()
	th.Queue.CACertPath = ""
	th.Queue.PrefetchCount = 0
	require.Equal(t, []string{
		"queue.ca_cert_path: required when queue.enabled = true",
		"queue.prefetch_count: must be 1-65535, got 0",
	}, problems(t, th.Validate()))
}

func TestQueueURL(t *testing.T) {
	t.Parallel()

	q := enabledQueue()
	q.Password = "p@ss/word"
	require.Equal(t, "amqps://mantis:p%40ss%2Fword@rabbitmq:5671/%2Fmantis", q.URL())

	q.Host = "::1"
	q.VHost = "/"
	require.Equal(t, "amqps://mantis:p%40ss%2Fword@[::1]:5671/%2F", q.URL())
}

const thoraxFile = `
name = "thorax-a"

[mandible]
address = "mandible:9090"
ca_cert_path = "/certs/ca.crt"
cert_path = "/certs/thorax.crt"
key_path = "/certs/thorax.key"

[queue]
enabled = true
host = "rabbitmq"
username = "mantis"
password = "file-secret"
ca_cert_path = "/certs/ca.crt"
prefetch_count = 20

[polling]
interval = "7s"

[agents]
insecure = true
`

func TestLoadFile(t *testing.T) {
	t.Parallel()

	c, err := config.LoadThorax(writeFile(t, "thorax.toml", thoraxFile), nil)
	require.NoError(t, err)
	require.Equal(t, "thorax-a", c.Name)
	require.Equal(t, "mandible:9090", c.Mandible.Address)
	require.Equal(t, 20, c.Queue.PrefetchCount)
	require.Equal(t, "rabbitmq", c.Queue.Host)
	require.Equal(t, 7*time.Second, c.Polling.Interval.Duration)
	// Keys the file leaves out keep their defaults.
	require.Equal(t, 5671, c.Queue.Port)
	require.Equal(t, "/mantis", c.Queue.VHost)
	require.Equal(t, time.Second, c.Polling.FallbackInterval.Duration)
	require.True(t, c.Agents.Insecure)

	c, err = config.LoadThorax("", env(map[string]string{
		"MANTIS_MANDIBLE_INSECURE": "true",
		"MANTIS_AGENTS_INSECURE":   "1",
	}))
	require.NoError(t, err)
	want := config.DefaultThorax()
	want.Mandible.Insecure = true
	want.Agents.Insecure = true
	require.Equal(t, want, c)
}

func TestLoadRejectsUnknownKeys(t *testing.T) {
	t.Parallel()

	path := writeFile(t, "thorax.toml", strings.Replace(thoraxFile, `interval = "7s"`, `intervall = "7s"`, 1)+`
[queue.tls]
verify = true

[metrics]
listen = "127.0.0.1:9000"
port = 1
`)
	_, err := config.LoadThorax(path, nil)
	require.Equal(t, []string{
		"metrics.port: unknown key in " + path,
		"polling.intervall: unknown key in " + path,
		"queue.tls: unknown key in " + path,
	}, problems(t, err))
}

func TestLoadNamesFileAndKeyOnBadTOML(t *testing.T) {
	t.Parallel()

	path := writeFile(t, "mandible.toml", "[queue]\nenabled = true\nport = \"amqps\"\n")
	_, err := config.LoadMandible(path, nil)
	require.ErrorContains(t, err, path)
	require.ErrorContains(t, err, "line 3")
	require.ErrorContains(t, err, "queue.port")

	path = writeFile(t, "mandible.toml", "[dispatch]\npoll_interval = \"soon\"\n")
	_, err = config.LoadMandible(path, nil)
	require.ErrorContains(t, err, path)
	require.ErrorContains(t, err, "dispatch.poll_interval")

	path = writeFile(t, "mandible.toml", "\n[dispatch\n")
	_, err = config.LoadMandible(path, nil)
	require.ErrorContains(t, err, path)
	require.ErrorContains(t, err, "line 3")

	path = writeFile(t, "agent.toml", "name = \"a\"\nmode = \"poll\"\nlabels = 3\n")
	_, err = config.LoadAgent(path, nil)
	require.ErrorContains(t, err, "labels: must be a table, got Integer in "+path)

	_, err = config.LoadAgent(filepath.Join(t.TempDir(), "missing.toml"), nil)
	require.ErrorIs(t, err, os.ErrNotExist)
}

// Environment beats file beats default, for scalars, durations, lists and
// tables alike.
func TestEnvOverridePrecedence(t *testing.T) {
	t.Parallel()

	path := writeFile(t, "mandible.toml", `
replica_id = "from-file"

[database]
url = "postgres://file/mantis"

[http]
tokens = ["file-token-0123456789"]

[grpc]
insecure = true

[dispatch]
poll_interval = "10s"
batch_size = 50

[queue]
host = "file-host"
`)
	c, err := config.LoadMandible(path, env(map[string]string{
		"MANTIS_REPLICA_ID":             "from-env",
		"MANTIS_DISPATCH_POLL_INTERVAL": "2s",
		"MANTIS_HTTP_TOKENS":            "env-token-0123456789, env-token-abcdefghij",
		"MANTIS_QUEUE_CA_CERT_PATH":     "/env/ca.crt",
		"MANTIS_QUEUE_PORT":             "5672",
	}))
	require.NoError(t, err)

	require.Equal(t, "from-env", c.ReplicaID)                                                       // env over file
	require.Equal(t, 2*time.Second, c.Dispatch.PollInterval.Duration)                               // env over file
	require.Equal(t, []string{"env-token-0123456789", "env-token-abcdefghij"}, c.HTTP.Tokens)       // env over file
	require.Equal(t, "/env/ca.crt", c.Queue.CACertPath)                                             // env over default
	require.Equal(t, 5672, c.Queue.Port)                                                            // env over default
	require.Equal(t, 50, c.Dispatch.BatchSize)                                                      // file over default
	require.Equal(t, "file-host", c.Queue.Host)                                                     // file over default
	require.Equal(t, 300*time.Second, c.Dispatch.ProcessingTimeout.Duration)                        // default
	require.True(t, c.GRPC.Insecure)                                                                // file over default
	require.Equal(t, "postgres://file/mantis", c.Database.URL)                                      // file
	require.Equal(t, config.DefaultMandible().Temporal, c.Temporal)                                 // defaults
	require.Equal(t, config.DefaultMandible().Dispatch.DeliveryTimeout, c.Dispatch.DeliveryTimeout) // default

	a, err := config.LoadAgent(writeFile(t, "agent.toml", `
name = "web-1"
mode = "listen"

[labels]
env = "staging"
zone = "a"

[listen]
address = "127.0.0.1:9191"
insecure = true
`), env(map[string]string{
		"MANTIS_LABELS":               "env=prod, team = payments",
		"MANTIS_EXEC_DEFAULT_TIMEOUT": "90s",
		"MANTIS_THORAX_ADDRESS":       "thorax:9190",
	}))
	require.NoError(t, err)
	require.Equal(t, map[string]string{"env": "prod", "team": "payments"}, a.Labels)
	require.Equal(t, 90*time.Second, a.Exec.DefaultTimeout.Duration)
	require.Equal(t, "thorax:9190", a.Thorax.Address)

	th, err := config.LoadThorax("", env(map[string]string{
		"MANTIS_NAME":                 "thorax-env",
		"MANTIS_QUEUE_PREFETCH_COUNT": "3",
		"MANTIS_MANDIBLE_INSECURE":    "true",
		"MANTIS_AGENTS_INSECURE":      "true",
		"MANTIS_POLLING_INTERVAL":     "250ms",
	}))
	require.NoError(t, err)
	require.Equal(t, "thorax-env", th.Name)
	require.Equal(t, 3, th.Queue.PrefetchCount)
	require.Equal(t, 250*time.Millisecond, th.Polling.Interval.Duration)
}

func TestDatabaseURLFallback(t *testing.T) {
	t.Parallel()

	base := map[string]string{
		"MANTIS_HTTP_TOKENS":   token,
		"MANTIS_GRPC_INSECURE": "true",
		"DATABASE_URL":         "postgres://plain/mantis",
	}
	with := func(extra map[string]string) map[string]string {
		m := maps.Clone(base)
		for k, v := range extra {
			m[k] = v
		}
		return m
	}

	c, err := config.LoadMandible("", env(base))
	require.NoError(t, err)
	require.Equal(t, "postgres://plain/mantis", c.Database.URL)

	c, err = config.LoadMandible("", env(with(map[string]string{"MANTIS_DATABASE_URL": "postgres://mantis/mantis"})))
	require.NoError(t, err)
	require.Equal(t, "postgres://mantis/mantis", c.Database.URL)

	path := writeFile(t, "mandible.toml", "[database]\nurl = \"postgres://file/mantis\"\n")
	c, err = config.LoadMandible(path, env(base))
	require.NoError(t, err)
	require.Equal(t, "postgres://file/mantis", c.Database.URL)
}

func TestBadEnvValueIsNamed(t *testing.T) {
	t.Parallel()

	_, err := config.LoadMandible("", env(map[string]string{
		"MANTIS_QUEUE_PORT":             "amqps",
		"MANTIS_DISPATCH_POLL_INTERVAL": "soon",
		"MANTIS_GRPC_INSECURE":          "maybe",
		"MANTIS_HTTP_TOKENS":            token,
		"MANTIS_DATABASE_URL":           "postgres://db/mantis",
	}))
	require.Equal(t, []string{
		`MANTIS_DISPATCH_POLL_INTERVAL: invalid value "soon": time: invalid duration "soon" (sets dispatch.poll_interval)`,
		`MANTIS_GRPC_INSECURE: invalid boolean "maybe" (sets grpc.insecure)`,
		`MANTIS_QUEUE_PORT: invalid integer "amqps" (sets queue.port)`,
		// grpc.insecure kept its default, so the certificates are missing too.
		"grpc.ca_cert_path: required unless grpc.insecure = true",
		"grpc.cert_path: required unless grpc.insecure = true",
		"grpc.key_path: required unless grpc.insecure = true",
	}, problems(t, err))

	_, err = config.LoadAgent("", env(map[string]string{
		"MANTIS_NAME":   "web-1",
		"MANTIS_MODE":   "listen",
		"MANTIS_LABELS": "env",
	}))
	require.ErrorContains(t, err, `MANTIS_LABELS: invalid pair "env", want key=value (sets labels)`)
}

func TestSecretsAreRedacted(t *testing.T) {
	t.Parallel()

	c := validMandible()
	c.Database.URL = "postgres://mantis:db-secret@db/mantis?password=db-secret2"
	c.Analysis.ModelURL = "https://models.example/v1"
	c.Analysis.Model = "m"
	c.Analysis.ModelKey = "model-secret"
	secrets := []string{"db-secret", "broker-secret", token, "model-secret"}

	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("config", "config", c)
	var text bytes.Buffer
	slog.New(slog.NewTextHandler(&text, nil)).Info("queue", "queue", c.Queue, "http", c.HTTP)

	outputs := map[string]string{
		"String": c.String(),
		"%v":     fmt.Sprintf("%v", c),
		"%+v":    fmt.Sprintf("%+v", c),
		"%#v":    fmt.Sprintf("%#v", c),
		"json":   logged.String(),
		"text":   text.String(),
		"queue":  fmt.Sprintf("%v %+v %#v", c.Queue, c.Queue, c.Queue),
		"http":   fmt.Sprintf("%v %+v %#v", c.HTTP, c.HTTP, c.HTTP),
		"db":     fmt.Sprintf("%v %+v %#v", c.Database, c.Database, c.Database),
		"model":  fmt.Sprintf("%v %+v %#v", c.Analysis, c.Analysis, c.Analysis),
	}
	for name, out := range outputs {
		for _, s := range secrets {
			require.NotContains(t, out, s, name)
		}
		if name != "db" {
			require.Contains(t, out, "[redacted]", name)
		}
	}
	require.Contains(t, logged.String(), `"replica_id":"`+c.ReplicaID+`"`)
	require.Contains(t, logged.String(), `"poll_interval":"30s"`)
	require.Contains(t, c.String(), `host = "rabbitmq"`)
	require.Contains(t, c.String(), "mantis:xxxxx@db/mantis?password=xxxxx")

	// The configuration itself keeps its secrets.
	require.Equal(t, []string{token}, c.HTTP.Tokens)
	require.Equal(t, "broker-secret", c.Queue.Password)

	th := validThorax()
	require.NotContains(t, th.String(), "broker-secret")
	require.NotContains(t, fmt.Sprintf("%v", th.Queue), "broker-secret")

	// A bad secret from the environment is named, not echoed.
	_, err := config.LoadMandible("", env(map[string]string{"MANTIS_DATABASE_URL": "mysql://u:db-secret@h/db"}))
	require.Error(t, err)
	require.NotContains(t, err.Error(), "db-secret")
}

// The example configurations in deploy/ load and validate. The API tokens
// are not in the file, by design, so the test supplies them as an operator
// would.
func TestDeployExamples(t *testing.T) {
	t.Parallel()

	m, err := config.LoadMandible("../../deploy/mandible.toml", nil)
	require.NoError(t, err)
	require.True(t, m.Queue.Enabled)
	require.Equal(t, "/etc/mantis/certs/ca.crt", m.Queue.CACertPath)
	require.Equal(t, "/etc/mantis/tokens.toml", m.HTTP.TokenFile)
	require.Empty(t, m.HTTP.Tokens, "the deprecated list stays commented out")
	require.Equal(t, config.DefaultMandible().Dispatch, m.Dispatch)
	require.Equal(t, config.DefaultMandible().Temporal, m.Temporal)

	th, err := config.LoadThorax("../../deploy/thorax.toml", nil)
	require.NoError(t, err)
	require.Equal(t, 10, th.Queue.PrefetchCount)
	require.Equal(t, config.DefaultThorax().Polling, th.Polling)

	a, err := config.LoadAgent("../../deploy/agent-poll.toml", nil)
	require.NoError(t, err)
	require.Equal(t, config.ModePoll, a.Mode)
	require.Equal(t, config.DefaultAgent().Exec, a.Exec)

	a, err = config.LoadAgent("../../deploy/agent-listen.toml", nil)
	require.NoError(t, err)
	require.Equal(t, config.ModeListen, a.Mode)
	require.Equal(t, config.DefaultAgent().Exec, a.Exec)
}

func TestDuration(t *testing.T) {
	t.Parallel()

	var d config.Duration
	require.NoError(t, d.UnmarshalText([]byte("1m30s")))
	require.Equal(t, 90*time.Second, d.Duration)
	b, err := d.MarshalText()
	require.NoError(t, err)
	require.Equal(t, "1m30s", string(b))
	require.Error(t, d.UnmarshalText([]byte("90")))
}

func TestLogHandler(t *testing.T) {
	t.Parallel()

	var buf bytes.Buffer
	slog.New(config.Log{Level: "warn", Format: "json"}.Handler(&buf)).Info("hidden")
	require.Empty(t, buf.String())
	slog.New(config.Log{Level: "warn", Format: "json"}.Handler(&buf)).Warn("shown")
	require.Contains(t, buf.String(), `"msg":"shown"`)
}

package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/config"
)

// secretFile writes content into a file of a fresh directory, as a mounted
// Kubernetes Secret presents a key.
func secretFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

const mandibleWithoutSecrets = `
[http]
token_file = "/etc/mantis/tokens.toml"
[grpc]
insecure = true
[queue]
enabled = true
host = "rabbitmq"
username = "mandible"
ca_cert_path = "/certs/ca.crt"
`

func TestMandibleSecretsFromFiles(t *testing.T) {
	t.Parallel()
	dbURL := "postgres://mantis:db-secret@db:5432/mantis"
	direct := "postgres://mantis:db-secret@db-direct:5432/mantis"
	path := writeFile(t, "mandible.toml", mandibleWithoutSecrets+`
[database]
url_file = "`+secretFile(t, dbURL+"\n")+`"
direct_url_file = "`+secretFile(t, direct)+`"
[temporal]
api_key_file = "`+secretFile(t, "temporal-key\r\n")+`"
[analysis]
model_url = "https://model.example/v1"
model = "small"
model_key_file = "`+secretFile(t, "model-key\n")+`"
`)
	cfg, err := config.LoadMandible(path, env(map[string]string{
		// Environment overrides name the _file keys as any other.
		"MANTIS_QUEUE_PASSWORD_FILE": secretFile(t, "broker-secret\n"),
		"MANTIS_HTTP_TOKENS_FILE":    secretFile(t, token+"\n"+strings.ToUpper(token)+"\n"),
	}))
	require.NoError(t, err)
	require.Equal(t, dbURL, cfg.Database.URL, "the trailing newline is trimmed")
	require.Equal(t, direct, cfg.Database.DirectURL)
	require.Equal(t, "temporal-key", cfg.Temporal.APIKey)
	require.Equal(t, "model-key", cfg.Analysis.ModelKey)
	require.Equal(t, "broker-secret", cfg.Queue.Password)
	require.Equal(t, []string{token, strings.ToUpper(token)}, cfg.HTTP.Tokens, "one token a line")
	for _, secret := range []string{"db-secret", "temporal-key", "model-key", "broker-secret", token} {
		require.NotContains(t, cfg.String(), secret)
	}
}

func TestSecretFileAndValueBothSetIsAProblemNamingBoth(t *testing.T) {
	t.Parallel()
	path := writeFile(t, "mandible.toml", mandibleWithoutSecrets+`
[database]
url = "postgres://mantis:db-secret@db:5432/mantis"
`)
	_, err := config.LoadMandible(path, env(map[string]string{
		"MANTIS_DATABASE_URL_FILE":   secretFile(t, "postgres://other@db/mantis"),
		"MANTIS_QUEUE_PASSWORD":      "broker-secret",
		"MANTIS_QUEUE_PASSWORD_FILE": secretFile(t, "broker-secret"),
	}))
	require.Equal(t, []string{
		"database.url_file: database.url and database.url_file are both set; set one",
		"queue.password_file: queue.password and queue.password_file are both set; set one",
	}, problems(t, err))
}

func TestUnreadableSecretFileNamesKeyAndPath(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "absent")
	path := writeFile(t, "mandible.toml", mandibleWithoutSecrets+`
[database]
url_file = "`+missing+`"
`)
	_, err := config.LoadMandible(path, env(map[string]string{"MANTIS_QUEUE_PASSWORD": "broker-secret"}))
	lines := problems(t, err)
	require.Len(t, lines, 1)
	require.Contains(t, lines[0], "database.url_file: reading the secret of database.url")
	require.Contains(t, lines[0], missing)
}

func TestDatabaseURLFileBeatsGenericDatabaseURL(t *testing.T) {
	t.Parallel()
	path := writeFile(t, "mandible.toml", strings.Replace(mandibleWithoutSecrets, "[queue]", "[queue]\npassword = \"broker-secret\"", 1))
	// DATABASE_URL is a generic variable: a url_file is an explicit setting.
	dbURL := "postgres://mantis:db-secret@db:5432/mantis"
	cfg, err := config.LoadMandible(path, env(map[string]string{
		"DATABASE_URL":             "postgres://someone-else@elsewhere/db",
		"MANTIS_DATABASE_URL_FILE": secretFile(t, dbURL),
	}))
	require.NoError(t, err)
	require.Equal(t, dbURL, cfg.Database.URL)
}

func TestThoraxBrokerPasswordFromFile(t *testing.T) {
	t.Parallel()
	c := validThorax()
	path := writeFile(t, "thorax.toml", `
[mandible]
ca_cert_path = "/certs/ca.crt"
cert_path = "/certs/thorax.crt"
key_path = "/certs/thorax.key"
[agents]
ca_cert_path = "/certs/ca.crt"
cert_path = "/certs/thorax.crt"
key_path = "/certs/thorax.key"
[queue]
enabled = true
host = "rabbitmq"
username = "thorax"
ca_cert_path = "/certs/ca.crt"
password_file = "`+secretFile(t, "thorax-broker-secret\n")+`"
`)
	cfg, err := config.LoadThorax(path, nil)
	require.NoError(t, err)
	require.Equal(t, "thorax-broker-secret", cfg.Queue.Password)
	require.NotContains(t, cfg.String(), "thorax-broker-secret")
	require.Equal(t, c.Mandible.TLS, cfg.Mandible.TLS)

	_, err = config.LoadThorax(path, env(map[string]string{"MANTIS_QUEUE_PASSWORD": "x"}))
	require.Equal(t, []string{"queue.password_file: queue.password and queue.password_file are both set; set one"}, problems(t, err))
}

// TestEverySecretHasAFileSibling keeps the _file keys complete: a secret key added
// without one fails here. The agent has no secret keys.
func TestEverySecretHasAFileSibling(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]any{"mandible": config.DefaultMandible(), "thorax": config.DefaultThorax(), "agent": config.DefaultAgent()} {
		keys := config.SecretKeys(cfg)
		files := config.SecretFileKeys(cfg)
		for _, key := range keys {
			require.Contains(t, files, key+config.SecretFileSuffix, "%s: secret key %s", name, key)
		}
		require.Len(t, files, len(keys), name)
	}
}

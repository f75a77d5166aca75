package config_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/config"
)

func TestHTTPPlaintextOnlyOnLoopbackUnlessAllowed(t *testing.T) {
	t.Parallel()
	const refusal = "http.listen: plain HTTP on %q, which is not a loopback address: set http.cert_path and http.key_path, " +
		"or http.allow_plaintext = true (unsafe: tokens cross the network in clear)"
	for _, listen := range []string{"127.0.0.1:8080", "[::1]:8080", "localhost:8080"} {
		c := validMandible()
		c.HTTP.Listen = listen
		require.NoError(t, c.Validate(), listen)
	}
	for _, listen := range []string{"0.0.0.0:8080", ":8080", "10.0.0.5:8080", "[::]:8080"} {
		c := validMandible()
		c.HTTP.Listen = listen
		require.Equal(t, []string{fmt.Sprintf(refusal, listen)}, problems(t, c.Validate()), listen)

		c.HTTP.AllowPlaintext = true
		require.NoError(t, c.Validate(), "allow_plaintext lets %s serve plain HTTP", listen)

		c.HTTP.AllowPlaintext = false
		c.HTTP.CertPath, c.HTTP.KeyPath = "/certs/mandible.crt", "/certs/mandible.key"
		require.NoError(t, c.Validate(), "TLS lets %s serve", listen)
	}
}

func TestHTTPTLSPairAndTokens(t *testing.T) {
	t.Parallel()
	c := validMandible()
	c.HTTP.CertPath = "/certs/mandible.crt"
	require.Equal(t, []string{"http.key_path: required when http.cert_path is set"}, problems(t, c.Validate()))

	c = validMandible()
	c.HTTP.KeyPath = "/certs/mandible.key"
	require.Equal(t, []string{"http.cert_path: required when http.key_path is set"}, problems(t, c.Validate()))

	c = validMandible()
	c.HTTP.Tokens = nil
	require.Equal(t, []string{"http.token_file: required (or the deprecated http.tokens)"}, problems(t, c.Validate()))
	c.HTTP.TokenFile = "/etc/mantis/tokens.toml"
	require.NoError(t, c.Validate(), "a token file alone is enough")
}

func TestHTTPKeysLoadFromFileAndEnvironment(t *testing.T) {
	t.Parallel()
	path := writeFile(t, "mandible.toml", `
[database]
url = "postgres://db/mantis"

[http]
listen = "0.0.0.0:8443"
cert_path = "/certs/mandible.crt"
key_path = "/certs/mandible.key"
token_file = "/etc/mantis/tokens.toml"

[grpc]
insecure = true
`)
	c, err := config.LoadMandible(path, env(map[string]string{"MANTIS_HTTP_ALLOW_PLAINTEXT": "true"}))
	require.NoError(t, err)
	require.Equal(t, "/certs/mandible.crt", c.HTTP.CertPath)
	require.Equal(t, "/certs/mandible.key", c.HTTP.KeyPath)
	require.Equal(t, "/etc/mantis/tokens.toml", c.HTTP.TokenFile)
	require.True(t, c.HTTP.AllowPlaintext)
	require.True(t, c.HTTP.TLS())
}

package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/spf13/cobra"

	"github.com/mantis-deploy/mantis/internal/apiclient"
)

// clientFlags are the global flags of the API commands.
type clientFlags struct {
	server     string
	token      string
	tokenFile  string
	configPath string
	output     string
}

// clientFile is mantisctl's optional config file.
type clientFile struct {
	Server string `toml:"server"`
	// TokenFile names a file holding the token (the preferred way).
	TokenFile string `toml:"token_file"`
	// Token is the token itself; keep the config file private (0600) if set.
	Token string `toml:"token"`
	// CACert is the CA that signs Mandible's HTTPS certificate.
	CACert string `toml:"ca_cert"`
}

const defaultServer = "http://127.0.0.1:8080"

// Environment variables mantisctl reads.
const (
	envServer = "MANTIS_API_URL"
	envToken  = "MANTIS_API_TOKEN"
	envCACert = "MANTIS_CA_CERT"
)

func defaultClientConfig() string {
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "mantis", "mantisctl.toml")
}

func (f *clientFlags) register(cmd *cobra.Command) {
	p := cmd.PersistentFlags()
	p.StringVar(&f.server, "server", "", "Mandible API URL (env "+envServer+"; default "+defaultServer+")")
	p.StringVar(&f.tokenFile, "token-file", "", "file holding the API token (or env "+envToken+", or token_file in the client config)")
	p.StringVar(&f.token, "token", "", "API token on the command line")
	_ = p.MarkDeprecated("token", "the command line is visible to other users of this host; use --token-file or "+envToken)
	p.StringVar(&f.configPath, "client-config", defaultClientConfig(), "config file with server, token_file and ca_cert keys")
	p.StringVarP(&f.output, "output", "o", "text", "output format: text or json")
}

// client resolves server, token and CA: flag, then environment, then config file.
func (f *clientFlags) client() (*apiclient.Client, error) {
	if f.output != "text" && f.output != "json" {
		return nil, fmt.Errorf("--output: must be text or json, got %q", f.output)
	}
	var file clientFile
	if f.configPath != "" {
		if _, err := os.Stat(f.configPath); err == nil {
			if _, err := toml.DecodeFile(f.configPath, &file); err != nil {
				return nil, fmt.Errorf("reading %s: %w", f.configPath, err)
			}
		}
	}
	server := first(f.server, os.Getenv(envServer), file.Server, defaultServer)
	token, err := f.resolveToken(file)
	if err != nil {
		return nil, err
	}
	c := apiclient.New(server, token)
	if ca := first(os.Getenv(envCACert), file.CACert); ca != "" && strings.HasPrefix(server, "https://") {
		if err := trustCA(c, ca); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// resolveToken takes the token from --token-file, the deprecated --token, the
// environment, then the config file's token_file or token.
func (f *clientFlags) resolveToken(file clientFile) (string, error) {
	if path := f.tokenFile; path != "" {
		return readTokenFile("--token-file", path)
	}
	if t := first(f.token, os.Getenv(envToken)); t != "" {
		return t, nil
	}
	if file.TokenFile != "" {
		return readTokenFile("token_file in "+f.configPath, file.TokenFile)
	}
	if file.Token != "" {
		return file.Token, nil
	}
	return "", fmt.Errorf("no API token: pass --token-file, set %s (source .mantis/stack.env for the local stack) or put token_file in %s", envToken, f.configPath)
}

func readTokenFile(what, path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s: reading the token: %w", what, err)
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", fmt.Errorf("%s: %s is empty", what, path)
	}
	return t, nil
}

// trustCA makes c verify Mandible's HTTPS certificate against the CA in path.
func trustCA(c *apiclient.Client, path string) error {
	pem, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading the API's CA: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return fmt.Errorf("reading the API's CA: no certificate in %s", path)
	}
	c.HTTP.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}
	return nil
}

func first(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// printJSON writes v indented.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

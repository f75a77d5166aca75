package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mantis-deploy/mantis/internal/apiclient"
)

// clientFlags are the global flags of the API commands.
type clientFlags struct {
	server string
	// token, when set, is the API token itself, for a caller holding it in memory;
	// no flag sets it (argvToken refuses --token).
	token       string
	argvToken   refusedToken
	tokenFile   string
	configPath  string
	contextName string
	output      string
	// format is output, checked before any command runs.
	format outputFormat
}

const defaultServer = "http://127.0.0.1:8080"

// Environment variables mantisctl reads.
const (
	envServer  = "MANTIS_API_URL"
	envToken   = "MANTIS_API_TOKEN"
	envCACert  = "MANTIS_CA_CERT"
	envContext = "MANTIS_CONTEXT"
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
	p.Var(&f.argvToken, "token", "refused: use --token-file or "+envToken)
	_ = p.MarkHidden("token")
	p.StringVar(&f.configPath, "client-config", defaultClientConfig(), "config file with server, token_file and ca_cert keys, or contexts of them")
	p.StringVar(&f.contextName, "context", "", "the context of the client config to use (env "+envContext+"; default its current-context)")
	p.StringVarP(&f.output, "output", "o", string(outputText), outputHelp)
	_ = cmd.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		names := make([]string, len(outputFormats))
		for i, o := range outputFormats {
			names[i] = string(o)
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	})
	_ = cmd.RegisterFlagCompletionFunc("context", completeContexts(f))
}

// validate checks the global flags before any command runs.
func (f *clientFlags) validate() error {
	if f.argvToken.given {
		return invalidInput(errTokenOnArgv)
	}
	format, err := parseOutputFormat(f.output)
	f.format = format
	return err
}

// settings resolves server, token and CA: flag, then environment, then the selected
// context of the config file (or its top-level keys when it selects none), then the
// default server.
func (f *clientFlags) settings() (clientSettings, error) {
	file, err := loadClientFile(f.configPath)
	if err != nil {
		return clientSettings{}, err
	}
	fromFile, err := file.selected(first(f.contextName, os.Getenv(envContext)), f.configPath)
	if err != nil {
		return clientSettings{}, err
	}
	s := clientSettings{
		Server: first(f.server, os.Getenv(envServer), fromFile.Server, defaultServer),
		CACert: first(os.Getenv(envCACert), fromFile.CACert),
	}
	s.Token, err = f.resolveToken(fromFile)
	return s, err
}

// client is the API client of the resolved settings.
func (f *clientFlags) client() (*apiclient.Client, error) {
	s, err := f.settings()
	if err != nil {
		return nil, err
	}
	c := apiclient.New(s.Server, s.Token)
	if s.CACert != "" && strings.HasPrefix(s.Server, "https://") {
		if err := trustCA(c, s.CACert); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// resolveToken takes the token from --token-file, the environment, then the config
// file's token_file or token.
func (f *clientFlags) resolveToken(file clientSettings) (string, error) {
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
	return "", invalidInput(fmt.Errorf("no API token: pass --token-file, set %s (source .mantis/stack.env for the local stack) or put token_file in %s", envToken, f.configPath))
}

func readTokenFile(what, path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", invalidInput(fmt.Errorf("%s: reading the token: %w", what, err))
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", invalidInput(fmt.Errorf("%s: %s is empty", what, path))
	}
	return t, nil
}

// trustCA makes c verify Mandible's HTTPS certificate against the CA in path.
func trustCA(c *apiclient.Client, path string) error {
	pem, err := os.ReadFile(path)
	if err != nil {
		return invalidInput(fmt.Errorf("reading the API's CA: %w", err))
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return invalidInput(fmt.Errorf("reading the API's CA: no certificate in %s", path))
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

// errTokenOnArgv refuses --token: a token on the command line is visible to every
// user of the host (ps, /proc) and stays in shell history.
var errTokenOnArgv = errors.New("--token is refused: a token on the command line is visible to other users of this host (ps) and stays in shell history; pass --token-file PATH, set " + envToken + " or put token_file in the client config")

// refusedToken is the --token flag, kept only to refuse it with errTokenOnArgv
// rather than cobra's "unknown flag". It remembers that it was given, never the
// value, so that no message repeats the secret.
type refusedToken struct{ given bool }

// String implements pflag.Value: the flag shows no default.
func (r *refusedToken) String() string { return "" }

// Set implements pflag.Value: it notes the flag was given and drops the value.
func (r *refusedToken) Set(string) error {
	r.given = true
	return nil
}

// Type implements pflag.Value.
func (r *refusedToken) Type() string { return "string" }

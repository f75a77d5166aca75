package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/BurntSushi/toml"
	"github.com/spf13/cobra"

	"github.com/mantis-deploy/mantis/internal/apiclient"
)

// clientFlags are the global flags of the API commands.
type clientFlags struct {
	server     string
	token      string
	configPath string
	output     string
}

// clientFile is mantisctl's optional config file.
type clientFile struct {
	Server string `toml:"server"`
	Token  string `toml:"token"`
}

const defaultServer = "http://127.0.0.1:8080"

func defaultClientConfig() string {
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "mantis", "mantisctl.toml")
}

func (f *clientFlags) register(cmd *cobra.Command) {
	p := cmd.PersistentFlags()
	p.StringVar(&f.server, "server", "", "Mandible API URL (env MANTIS_API_URL; default "+defaultServer+")")
	p.StringVar(&f.token, "token", "", "API bearer token (env MANTIS_API_TOKEN)")
	p.StringVar(&f.configPath, "client-config", defaultClientConfig(), "config file with server and token keys")
	p.StringVarP(&f.output, "output", "o", "text", "output format: text or json")
}

// client resolves server and token: flag, then environment, then config file.
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
	server := first(f.server, os.Getenv("MANTIS_API_URL"), file.Server, defaultServer)
	token := first(f.token, os.Getenv("MANTIS_API_TOKEN"), file.Token)
	if token == "" {
		return nil, fmt.Errorf("no API token: pass --token, set MANTIS_API_TOKEN (source .mantis/stack.env for the local stack) or put token in %s", f.configPath)
	}
	return apiclient.New(server, token), nil
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

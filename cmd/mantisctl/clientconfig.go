package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"
)

// currentContextKey is the config file's key naming the default context.
const currentContextKey = "current-context"

// clientSettings is where and how to reach one Mandible: the config file's top-level
// keys, or one of its contexts.
type clientSettings struct {
	Server string `toml:"server" json:"server,omitempty"`
	// TokenFile names a file holding the token (the preferred way).
	TokenFile string `toml:"token_file" json:"token_file,omitempty"`
	// Token is the token itself; keep the config file private (0600) if set.
	Token string `toml:"token" json:"-"`
	// CACert is the CA that signs Mandible's HTTPS certificate.
	CACert string `toml:"ca_cert" json:"ca_cert,omitempty"`
}

// clientFile is mantisctl's optional config file: top-level settings for one server,
// or named contexts for several, of which current-context is used by default.
type clientFile struct {
	Server         string                    `toml:"server"`
	TokenFile      string                    `toml:"token_file"`
	Token          string                    `toml:"token"`
	CACert         string                    `toml:"ca_cert"`
	CurrentContext string                    `toml:"current-context"`
	Contexts       map[string]clientSettings `toml:"contexts"`
}

// loadClientFile reads the config file at path; a missing file is an empty one.
func loadClientFile(path string) (clientFile, error) {
	var file clientFile
	if path == "" {
		return file, nil
	}
	if _, err := os.Stat(path); err != nil {
		return file, nil
	}
	md, err := toml.DecodeFile(path, &file)
	if err != nil {
		return file, invalidInput(fmt.Errorf("reading %s: %w", path, err))
	}
	if undecoded := md.Undecoded(); len(undecoded) > 0 {
		return file, invalidInput(fmt.Errorf("reading %s: unknown key %s", path, undecoded[0]))
	}
	return file, nil
}

// selected is the settings of the context named name, else of the current context;
// with neither, the file's top-level settings. Only the context's own keys are used,
// so one server's token never reaches another.
func (file clientFile) selected(name, path string) (clientSettings, error) {
	name = first(name, file.CurrentContext)
	if name == "" {
		return clientSettings{Server: file.Server, TokenFile: file.TokenFile, Token: file.Token, CACert: file.CACert}, nil
	}
	s, ok := file.Contexts[name]
	if !ok {
		return s, invalidInput(fmt.Errorf("context %q: not in %s (known: %s)", name, path, strings.Join(file.contextNames(), ", ")))
	}
	return s, nil
}

// contextNames are the file's contexts, sorted.
func (file clientFile) contextNames() []string {
	names := make([]string, 0, len(file.Contexts))
	for n := range file.Contexts {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// currentContextLine matches a top-level current-context assignment.
var currentContextLine = regexp.MustCompile(`^\s*"?` + regexp.QuoteMeta(currentContextKey) + `"?\s*=`)

// setCurrentContext makes name the current context of the config file at path,
// editing only that one line so the file's comments and layout stay.
func setCurrentContext(path, name string) error {
	file, err := loadClientFile(path)
	if err != nil {
		return err
	}
	if _, ok := file.Contexts[name]; !ok {
		return invalidInput(fmt.Errorf("context %q: not in %s (known: %s)", name, path, strings.Join(file.contextNames(), ", ")))
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	var assignment bytes.Buffer
	if err := toml.NewEncoder(&assignment).Encode(map[string]string{currentContextKey: name}); err != nil {
		return fmt.Errorf("encoding %s: %w", currentContextKey, err)
	}
	lines := strings.SplitAfter(string(data), "\n")
	replaced := false
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "[") {
			break // past the top-level keys
		}
		if currentContextLine.MatchString(l) {
			lines[i], replaced = assignment.String(), true
			break
		}
	}
	if !replaced {
		lines = append([]string{assignment.String()}, lines...)
	}
	return writeFileAtomic(path, []byte(strings.Join(lines, "")))
}

// writeFileAtomic replaces path with data, keeping its permissions.
func writeFileAtomic(path string, data []byte) error {
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".mantisctl-*.toml")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Chmod(st.Mode().Perm()); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

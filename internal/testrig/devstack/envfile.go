package devstack

// The stack's environment file: what `mantisctl dev` and the tests source to reach the
// servers.

import (
	"fmt"
	"os"
	"sort"
	"strings"
)

// WriteEnv writes Env as a shell-sourceable file.
func (s *Stack) WriteEnv(path string, extra map[string]string) error {
	all := map[string]string{}
	for k, v := range s.Env {
		all[k] = v
	}
	for k, v := range extra {
		all[k] = v
	}
	keys := make([]string, 0, len(all))
	for k := range all {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("# Mantis local stack: source this file to reach every part.\n")
	for _, k := range keys {
		if strings.ContainsAny(all[k], "\n\r") {
			return fmt.Errorf("stack.env: value of %s holds a line break", k)
		}
		fmt.Fprintf(&b, "export %s=%s\n", k, shellQuote(all[k]))
	}
	return os.WriteFile(path, []byte(b.String()), 0o600)
}

// ReadEnv parses a file written by WriteEnv.
func ReadEnv(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	env := map[string]string{}
	for _, line := range splitLines(string(b)) {
		line = strings.TrimPrefix(strings.TrimSpace(line), "export ")
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		env[k] = strings.ReplaceAll(strings.TrimSuffix(strings.TrimPrefix(v, "'"), "'"), `'\''`, "'")
	}
	return env, nil
}

func shellQuote(v string) string { return "'" + strings.ReplaceAll(v, "'", `'\''`) + "'" }

func splitLines(s string) []string { return strings.Split(strings.TrimRight(s, "\n"), "\n") }

package secretenv

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// The forms of a secret's value.
const (
	// FileRef starts a reference to a file on Mandible, under secrets.files_dir.
	FileRef = "file:"
	// EnvRef starts a reference to a variable of Mandible's environment.
	EnvRef = "env:"
	// ValueRef starts a literal value that would otherwise read as a reference.
	ValueRef = "value:"
	// EnvRefNamePrefix starts the name of every variable an env: reference may name,
	// so that a deployment cannot read Mandible's own settings (DATABASE_URL, ...).
	EnvRefNamePrefix = "MANTIS_SECRET_"
	// MaxFileBytes bounds what a file: reference reads.
	MaxFileBytes = 32 << 10
)

// Resolver turns a secret's value into what the command sees.
type Resolver struct {
	// FilesDir is the only directory file: references may name files under; empty
	// refuses every file: reference.
	FilesDir string
	// LookupEnv reads Mandible's environment (os.LookupEnv when nil).
	LookupEnv func(string) (string, bool)
}

// Resolve returns the value a secret stands for: a file's content, an environment
// variable's value, or the literal.
func (r Resolver) Resolve(name, v string) (string, error) {
	switch {
	case strings.HasPrefix(v, ValueRef):
		return strings.TrimPrefix(v, ValueRef), nil
	case strings.HasPrefix(v, EnvRef):
		ref := strings.TrimPrefix(v, EnvRef)
		if !strings.HasPrefix(ref, EnvRefNamePrefix) {
			return "", fmt.Errorf("secret env %s: env: references name %s* variables only", name, EnvRefNamePrefix)
		}
		lookup := r.LookupEnv
		if lookup == nil {
			lookup = os.LookupEnv
		}
		val, ok := lookup(ref)
		if !ok {
			return "", fmt.Errorf("secret env %s: Mandible's environment has no %s", name, ref)
		}
		return val, nil
	case strings.HasPrefix(v, FileRef):
		return r.readFile(name, strings.TrimPrefix(v, FileRef))
	}
	return v, nil
}

// Literal returns the value a secret given as v stands for when it is a literal, and
// false when it is a reference, resolved only when a command needs it.
func Literal(v string) (string, bool) {
	switch {
	case strings.HasPrefix(v, ValueRef):
		return strings.TrimPrefix(v, ValueRef), true
	case strings.HasPrefix(v, EnvRef), strings.HasPrefix(v, FileRef):
		return "", false
	}
	return v, true
}

// readFile reads a file: reference, refusing a path outside FilesDir.
func (r Resolver) readFile(name, path string) (string, error) {
	if r.FilesDir == "" {
		return "", fmt.Errorf("secret env %s: file: references need secrets.files_dir on Mandible", name)
	}
	dir, err := filepath.EvalSymlinks(r.FilesDir)
	if err != nil {
		return "", fmt.Errorf("secret env %s: reading secrets.files_dir: %w", name, err)
	}
	real, err := filepath.EvalSymlinks(filepath.Clean(path))
	if err != nil {
		return "", fmt.Errorf("secret env %s: reading its file: %w", name, err)
	}
	if rel, err := filepath.Rel(dir, real); err != nil || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
		return "", fmt.Errorf("secret env %s: its file is not under secrets.files_dir", name)
	}
	f, err := os.Open(real)
	if err != nil {
		return "", fmt.Errorf("secret env %s: reading its file: %w", name, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return "", fmt.Errorf("secret env %s: reading its file: %w", name, err)
	}
	if len(data) > MaxFileBytes {
		return "", fmt.Errorf("secret env %s: its file holds more than %d bytes", name, MaxFileBytes)
	}
	return strings.TrimSuffix(string(data), "\n"), nil
}

// OpenEnv returns env with every sealed value opened and resolved, for the command of
// deployment deploymentID ("" for none). env itself is left alone.
func OpenEnv(k Keyring, r Resolver, deploymentID string, env map[string]string) (map[string]string, error) {
	var out map[string]string
	for name, v := range env {
		if !IsSealed(v) {
			continue
		}
		if out == nil {
			out = make(map[string]string, len(env))
			for k2, v2 := range env {
				out[k2] = v2
			}
		}
		stored, err := Open(k, deploymentID, name, v)
		if err != nil {
			return nil, err
		}
		if out[name], err = r.Resolve(name, stored); err != nil {
			return nil, err
		}
	}
	if out == nil {
		return env, nil
	}
	return out, nil
}

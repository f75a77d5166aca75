package spec

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/mantis-deploy/mantis/internal/safetext"
	"github.com/mantis-deploy/mantis/internal/secretenv"
)

// MaxSealedValueBytes bounds a sealed env_secret value: a MaxEnvValueBytes value once
// sealed and base64-encoded fits.
const MaxSealedValueBytes = 64 << 10

// secretProblems lists the problems of the step's env_secret, each naming its field
// and never its value.
func (s Step) secretProblems(at string) []FieldError {
	var errs []FieldError
	add := func(field, format string, args ...any) {
		errs = append(errs, FieldError{Field: field, Problem: fmt.Sprintf(format, args...)})
	}
	if n := len(s.Env) + len(s.EnvSecret); len(s.EnvSecret) > 0 && n > MaxEnvVars {
		add(at+".env_secret", "env and env_secret hold at most %d variables together, got %d", MaxEnvVars, n)
	}
	for _, k := range sortedKeys(s.EnvSecret) {
		field := at + ".env_secret." + k
		v := s.EnvSecret[k]
		if !envKeyPattern.MatchString(k) {
			add(at+".env_secret", "%q is not a valid environment variable name", k)
			continue
		}
		if _, dup := s.Env[k]; dup {
			add(field, "is also set in env: a variable is secret or not")
		}
		if secretenv.IsSealed(v) {
			if problem := safetext.Unstorable(v, MaxSealedValueBytes); problem != "" {
				add(field, "sealed value: %s", problem)
			}
			continue
		}
		if problem := safetext.Unstorable(v, MaxEnvValueBytes); problem != "" {
			add(field, "%s", problem)
		}
		switch {
		case strings.HasPrefix(v, secretenv.FileRef):
			if p := strings.TrimPrefix(v, secretenv.FileRef); !filepath.IsAbs(p) || filepath.Clean(p) != p {
				add(field, "a file: reference names an absolute, clean path")
			}
		case strings.HasPrefix(v, secretenv.EnvRef):
			if n := strings.TrimPrefix(v, secretenv.EnvRef); !strings.HasPrefix(n, secretenv.EnvRefNamePrefix) || !envKeyPattern.MatchString(n) {
				add(field, "an env: reference names a variable %s<NAME> of Mandible's environment", secretenv.EnvRefNamePrefix)
			}
		}
	}
	return errs
}

// HasSecrets reports whether any step has env_secret.
func (d Deployment) HasSecrets() bool {
	for _, s := range d.Steps {
		if len(s.EnvSecret) > 0 {
			return true
		}
	}
	return false
}

// SealSecrets returns d with every env_secret value that is not sealed yet replaced by
// seal(name, value); d itself is left alone.
func (d Deployment) SealSecrets(seal func(name, value string) (string, error)) (Deployment, error) {
	return d.mapSecrets(func(at, name, v string) (string, error) {
		if secretenv.IsSealed(v) {
			return v, nil
		}
		sealed, err := seal(name, v)
		if err != nil {
			return "", fmt.Errorf("%s.env_secret.%s: %w", at, name, err)
		}
		return sealed, nil
	})
}

// RedactSecrets returns d with every env_secret value replaced by secretenv.Redacted,
// for views and logs; d itself is left alone.
func (d Deployment) RedactSecrets() Deployment {
	out, _ := d.mapSecrets(func(string, string, string) (string, error) { return secretenv.Redacted, nil })
	return out
}

// CommandEnv is the env a step's command gets: env and env_secret together, the
// secrets as they are (sealed, once Mandible has sealed them).
func (s Step) CommandEnv() map[string]string {
	if len(s.EnvSecret) == 0 {
		return s.Env
	}
	env := make(map[string]string, len(s.Env)+len(s.EnvSecret))
	for k, v := range s.Env {
		env[k] = v
	}
	for k, v := range s.EnvSecret {
		env[k] = v
	}
	return env
}

func (d Deployment) mapSecrets(f func(at, name, v string) (string, error)) (Deployment, error) {
	if !d.HasSecrets() {
		return d, nil
	}
	steps := make([]Step, len(d.Steps))
	for i, s := range d.Steps {
		if len(s.EnvSecret) > 0 {
			env := make(map[string]string, len(s.EnvSecret))
			for k, v := range s.EnvSecret {
				out, err := f(fmt.Sprintf("steps[%d]", i), k, v)
				if err != nil {
					return d, err
				}
				env[k] = out
			}
			s.EnvSecret = env
		}
		steps[i] = s
	}
	d.Steps = steps
	return d, nil
}

package config_test

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/config"
)

// secretVars are the variables whose values must never show in an error or in a
// configuration's String.
var secretVars = []string{"MANTIS_QUEUE_PASSWORD", "MANTIS_HTTP_TOKENS", "MANTIS_ANALYSIS_MODEL_KEY", "MANTIS_DATABASE_URL"}

// parseEnv reads "NAME=VALUE" lines into the lookup the loaders take.
func parseEnv(text string) (map[string]string, func(string) (string, bool)) {
	vars := map[string]string{}
	for line := range strings.SplitSeq(text, "\n") {
		if name, value, ok := strings.Cut(line, "="); ok {
			vars[name] = value
		}
	}
	return vars, env(vars)
}

// loader is one of LoadMandible, LoadThorax and LoadAgent with its result as a
// Stringer.
type loader func(path string, env func(string) (string, bool)) (fmt.Stringer, error)

// fuzzLoad loads file (no file when empty) and envText with load and checks the
// properties every loader keeps: no panic; a file that does not parse is refused
// naming the file; every other refusal is a list of problems each naming its key or
// variable; secrets given in the environment show neither in a refusal nor in the
// loaded configuration's String; an accepted configuration validates.
func fuzzLoad(t *testing.T, load loader, secretKeys []string, file []byte, envText string) {
	path := ""
	if len(file) > 0 {
		path = filepath.Join(t.TempDir(), "config.toml")
		require.NoError(t, os.WriteFile(path, file, 0o600))
	}
	vars, lookup := parseEnv(envText)
	cfg, err := load(path, lookup)
	var text string
	if err != nil {
		text = err.Error()
		var errs config.Errors
		if !errors.As(err, &errs) {
			require.NotEmpty(t, path, "a refusal without a file is not a list of problems: %v", err)
			require.True(t, strings.HasPrefix(text, "reading config "+path), "a file refusal that does not name the file: %q", text)
			requireSecretLineHidden(t, err, secretKeys, string(file), path)
		} else {
			require.NotEmpty(t, errs)
			for _, e := range errs {
				var fe *config.FieldError
				require.True(t, errors.As(e, &fe), "a problem that is not a FieldError: %v", e)
				require.NotEmpty(t, fe.Key, "a problem naming no key: %v", e)
				require.NotEmpty(t, fe.Problem, "a problem without text: %v", e)
			}
		}
	} else {
		text = cfg.String()
		require.NoError(t, cfg.(interface{ Validate() error }).Validate())
	}
	for _, name := range secretVars {
		for _, secret := range secretsOf(name, vars) {
			if len(secret) >= 8 && !appearsElsewhere(secret, name, vars, string(file)) {
				require.NotContains(t, text, secret, "the secret in %s shows", name)
			}
		}
	}
}

// requireSecretLineHidden checks that a parse error about one of secretKeys quotes
// nothing of the value written on its line.
func requireSecretLineHidden(t *testing.T, err error, secretKeys []string, file, path string) {
	t.Helper()
	var pe toml.ParseError
	if !errors.As(err, &pe) || !slices.Contains(secretKeys, pe.LastKey) {
		return
	}
	lines := strings.Split(file, "\n")
	if pe.Position.Line < 1 || pe.Position.Line > len(lines) {
		return
	}
	_, value, ok := strings.Cut(lines[pe.Position.Line-1], "=")
	value = strings.Trim(strings.TrimSpace(value), `"'[`)
	if !ok || len(value) < 6 {
		return
	}
	probe := value[:6]
	if strings.Contains(path, probe) || strings.Contains(pe.LastKey, probe) || strings.Contains(pe.Message, "incompatible types") {
		return
	}
	require.NotContains(t, err.Error(), probe, "a parse error quotes the value of secret %s", pe.LastKey)
}

// secretsOf returns the secrets the variable name holds: the password of a URL, or
// each of a comma-separated list.
func secretsOf(name string, vars map[string]string) []string {
	value, ok := vars[name]
	if !ok {
		return nil
	}
	if name == "MANTIS_DATABASE_URL" {
		u, err := url.Parse(value)
		if err != nil || u.User == nil {
			return nil
		}
		p, _ := u.User.Password()
		return []string{p}
	}
	var out []string
	for part := range strings.SplitSeq(value, ",") {
		out = append(out, strings.TrimSpace(part))
	}
	return out
}

// appearsElsewhere reports whether s appears in the file or in any variable other
// than the secret's own, so that finding it in the output proves nothing.
func appearsElsewhere(s, own string, vars map[string]string, file string) bool {
	if strings.Contains(file, s) {
		return true
	}
	for name, value := range vars {
		if strings.Contains(name, s) || (name != own && strings.Contains(value, s)) {
			return true
		}
	}
	return false
}

// configSeeds are files and environments for every loader.
var configSeeds = []struct{ file, env string }{
	{"", ""},
	{"name = \"n\"\nmode = \"poll\"\n[thorax]\naddress = \"localhost:7443\"\n", ""},
	{"replica_id = \"r\"\n[database]\nurl = \"postgres://u:p@h/db\"\n[http]\ntokens = [\"0123456789abcdef\"]\n", "MANTIS_QUEUE_PASSWORD=hunter2hunter2"},
	{"[queue]\nenabled = true\nhost = \"rabbit\"\npassword = 3\n", ""},
	{"labels = 3\nunknown = 1\n[nope]\na = 1\n", "MANTIS_EXEC_MAX_CONCURRENT=ten"},
	{"[log]\nlevel = \"loud\"\n", "MANTIS_LABELS=a=b,=c\nMANTIS_HTTP_TOKENS=short,0123456789abcdef-secret"},
	{"x = [", "MANTIS_DATABASE_URL=mysql://u:secretpassword@h/db"},
	{"[queue]\npassword = hunter2secret\n", ""},
	{"[http]\ntokens = [0123456789abcdef-token]\n", ""},
	{"", "MANTIS_DATABASE_URL=postgres://u:pa%zzssword@h:99999/db"},
	{"", "MANTIS_DISPATCH_BATCH_SIZE=99999999999999999999\nMANTIS_HTTP_MAX_BODY_BYTES=-1"},
	{"", "MANTIS_POLLING_INTERVAL=soon\nMANTIS_MANDIBLE_ADDRESS=:0\nMANTIS_NAME=bad name!"},
	{"", "MANTIS_ANALYSIS_MODEL_URL=ftp://x\nMANTIS_ANALYSIS_MODEL_KEY=model-key-secret\nMANTIS_QUEUE_PASSWORD=p4ssw0rd-in-env"},
}

func addConfigSeeds(f *testing.F) {
	for _, s := range configSeeds {
		f.Add([]byte(s.file), s.env)
	}
}

// FuzzLoadMandible fuzzes Mandible's TOML file and MANTIS_ environment.
func FuzzLoadMandible(f *testing.F) {
	addConfigSeeds(f)
	f.Fuzz(func(t *testing.T, file []byte, envText string) {
		fuzzLoad(t, func(path string, env func(string) (string, bool)) (fmt.Stringer, error) {
			return config.LoadMandible(path, env)
		}, []string{"queue.password", "http.tokens", "analysis.model_key", "temporal.api_key"}, file, envText)
	})
}

// FuzzLoadThorax fuzzes Thorax's TOML file and MANTIS_ environment.
func FuzzLoadThorax(f *testing.F) {
	addConfigSeeds(f)
	f.Fuzz(func(t *testing.T, file []byte, envText string) {
		fuzzLoad(t, func(path string, env func(string) (string, bool)) (fmt.Stringer, error) {
			return config.LoadThorax(path, env)
		}, []string{"queue.password"}, file, envText)
	})
}

// FuzzLoadAgent fuzzes the agent's TOML file and MANTIS_ environment.
func FuzzLoadAgent(f *testing.F) {
	addConfigSeeds(f)
	f.Fuzz(func(t *testing.T, file []byte, envText string) {
		fuzzLoad(t, func(path string, env func(string) (string, bool)) (fmt.Stringer, error) {
			return config.LoadAgent(path, env)
		}, nil, file, envText)
	})
}

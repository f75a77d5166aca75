package deploy_test

import (
	"encoding/base64"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/devcerts"
)

// composePlaceholders stand for what setup.sh writes into the configurations.
var composePlaceholders = map[string]string{
	"@POSTGRES_PASSWORD@":          "placeholder-postgres-password",
	"@RABBITMQ_MANDIBLE_PASSWORD@": "placeholder-mandible-password",
	"@RABBITMQ_THORAX_PASSWORD@":   "placeholder-thorax-password",
}

// Where Compose puts a service's secrets, and how setup.sh names the rendered files.
const (
	composeSecretsDir = "/run/secrets"
	setupScript       = "compose/setup.sh"
)

// composeProcess is the part of a Mantis service the configuration check reads.
type composeProcess struct {
	Entrypoint  []string          `json:"entrypoint"`
	Command     []string          `json:"command"`
	Secrets     []string          `json:"secrets"`
	Volumes     []string          `json:"volumes"`
	Tmpfs       []string          `json:"tmpfs"`
	Environment map[string]string `json:"environment"`
	Healthcheck *struct {
		Test []string `json:"test"`
	} `json:"healthcheck"`
}

// composeFile is compose.yaml's services (anchors merged) and its file secrets.
type composeFile struct {
	Services map[string]composeProcess `json:"services"`
	Secrets  map[string]struct {
		File string `json:"file"`
	} `json:"secrets"`
}

// setupRenders maps each file setup.sh writes into secrets/ to its template in config/.
func setupRenders(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(setupScript)
	require.NoError(t, err)
	out := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^(?:render|cp) (config/\S+\.toml\.in) (secrets/\S+)$`).FindAllStringSubmatch(string(b), -1) {
		out["./"+m[2]] = m[1]
	}
	require.Len(t, out, 3, "setup.sh renders mandible's, thorax's and the agent's configuration")
	return out
}

// setupCertFiles lists the files setup.sh's `mantisctl dev certs` writes into certs/.
func setupCertFiles(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(setupScript)
	require.NoError(t, err)
	files := []string{"ca.crt"}
	for _, name := range devcerts.PairNames() {
		files = append(files, name+".crt", name+".key")
	}
	for _, m := range regexp.MustCompile(`--issue (\w+)/(\S+)`).FindAllStringSubmatch(string(b), -1) {
		files = append(files, m[1]+"-"+m[2]+".crt", m[1]+"-"+m[2]+".key")
	}
	return files
}

// TestComposeConfigurationsLoad renders each Mantis service's configuration as
// setup.sh does (placeholders for its secrets), lays out the container's secrets and
// volumes under a temporary root, and loads the file with the process's own loader and
// the service's environment: a key the loader refuses, a path in no mount or a
// health check on another port than the process listens on fails here.
func TestComposeConfigurationsLoad(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("compose/compose.yaml")
	require.NoError(t, err)
	var doc composeFile
	require.NoError(t, yaml.Unmarshal(b, &doc))
	renders, certs := setupRenders(t), setupCertFiles(t)
	checked := 0
	for name, svc := range doc.Services {
		if len(svc.Entrypoint) == 0 || !strings.HasPrefix(svc.Entrypoint[0], "/usr/local/bin/") {
			continue
		}
		t.Run(name, func(t *testing.T) {
			checkComposeProcess(t, doc, svc, renders, certs)
		})
		checked++
	}
	require.Equal(t, 6, checked, "two Mandible, two Thorax and two agents")
}

// checkComposeProcess loads one service's configuration as its container would.
func checkComposeProcess(t *testing.T, doc composeFile, svc composeProcess, renders map[string]string, certs []string) {
	i := slices.Index(svc.Command, "--config")
	require.True(t, i >= 0 && i+1 < len(svc.Command), "command: --config <path>")
	file := svc.Command[i+1]
	require.Equal(t, composeSecretsDir, path.Dir(file), "the configuration is a Compose secret")
	secret := path.Base(file)
	require.Contains(t, svc.Secrets, secret)
	template, ok := renders[doc.Secrets[secret].File]
	require.True(t, ok, "secret %s (%s) is a file setup.sh renders", secret, doc.Secrets[secret].File)
	text := renderComposeTemplate(t, "compose/"+template)

	root := materializeComposeMounts(t, svc, certs)
	rootedText := filePathSetting.ReplaceAllStringFunc(text, func(line string) string {
		m := filePathSetting.FindStringSubmatch(line)
		if !isFileKey(m[1]) {
			return line
		}
		requireMounted(t, root, svc, m[2])
		return strings.Replace(line, `"`+m[2], `"`+root+m[2], 1)
	})
	cfgPath := filepath.Join(root, file)
	require.NoError(t, os.WriteFile(cfgPath, []byte(rootedText), 0o600))
	env := func(k string) (string, bool) {
		v, ok := svc.Environment[k]
		if ok && path.IsAbs(v) && isFileKey(strings.ToLower(k)) {
			requireMounted(t, root, svc, v)
			v = root + v
		}
		return v, ok
	}
	var listen string
	switch bin := path.Base(svc.Entrypoint[0]); bin {
	case "mandible":
		cfg, err := config.LoadMandible(cfgPath, env)
		require.NoError(t, err, "mandible refuses its configuration:\n%s", text)
		listen = cfg.HTTP.Listen
	case "thorax":
		cfg, err := config.LoadThorax(cfgPath, env)
		require.NoError(t, err, "thorax refuses its configuration:\n%s", text)
		listen = cfg.Metrics.Listen
	case "agent":
		cfg, err := config.LoadAgent(cfgPath, env)
		require.NoError(t, err, "the agent refuses its configuration:\n%s", text)
		listen = cfg.Metrics.Listen
	default:
		t.Fatalf("unknown binary %s", bin)
	}
	probe, err := url.Parse(svc.Environment["MANTIS_HEALTHCHECK_URL"])
	require.NoError(t, err)
	_, port, err := net.SplitHostPort(listen)
	require.NoError(t, err)
	require.Equal(t, port, probe.Port(), "the health check probes the port the process listens on")
}

// filePathSetting is a TOML line setting a key to an absolute path.
var filePathSetting = regexp.MustCompile(`(?m)^(\w+)\s*=\s*"(/[^"]*)"`)

// isFileKey reports whether a configuration key names a file or a directory.
func isFileKey(key string) bool {
	return strings.HasSuffix(key, "_path") || strings.HasSuffix(key, "_file") || strings.HasSuffix(key, "dir")
}

// renderComposeTemplate substitutes the placeholders as setup.sh does and checks that
// none is left and that the result is still a URL where it was one.
func renderComposeTemplate(t *testing.T, template string) string {
	t.Helper()
	b, err := os.ReadFile(template)
	require.NoError(t, err)
	text := string(b)
	for k, v := range composePlaceholders {
		text = strings.ReplaceAll(text, k, v)
	}
	require.NotRegexp(t, `@[A-Z_]+@`, text, "%s has a placeholder setup.sh does not fill", template)
	return text
}

// materializeComposeMounts lays out the container's secrets, bind mounts, named
// volumes and tmpfs under a temporary root; ./certs holds the files setup.sh makes.
func materializeComposeMounts(t *testing.T, svc composeProcess, certs []string) string {
	t.Helper()
	root := t.TempDir()
	secrets := filepath.Join(root, composeSecretsDir)
	require.NoError(t, os.MkdirAll(secrets, 0o700))
	for _, s := range svc.Secrets {
		content := "placeholder-secret"
		if s == "codec_keys" {
			content = "k1 " + base64.StdEncoding.EncodeToString(make([]byte, 32)) + "\n"
		}
		require.NoError(t, os.WriteFile(filepath.Join(secrets, s), []byte(content), 0o600))
	}
	for _, mount := range append(slices.Clone(svc.Volumes), svc.Tmpfs...) {
		src, dst, bind := composeMount(mount)
		dir := filepath.Join(root, dst)
		require.NoError(t, os.MkdirAll(dir, 0o700))
		if bind && src == "./certs" {
			for _, f := range certs {
				require.NoError(t, os.WriteFile(filepath.Join(dir, f), []byte("placeholder"), 0o600))
			}
		}
	}
	return root
}

// composeMount splits "src:dst[:mode]" (or a tmpfs "dst"); bind is true for a host path.
func composeMount(spec string) (src, dst string, bind bool) {
	parts := strings.Split(spec, ":")
	if len(parts) == 1 {
		return "", parts[0], false
	}
	return parts[0], parts[1], strings.HasPrefix(parts[0], ".") || strings.HasPrefix(parts[0], "/")
}

// requireMounted checks that p is a file the container has (a secret or a file of a
// bind mount) or lies in one of its writable volumes.
func requireMounted(t *testing.T, root string, svc composeProcess, p string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(root, p)); err == nil {
		return
	}
	for _, mount := range append(slices.Clone(svc.Volumes), svc.Tmpfs...) {
		_, dst, bind := composeMount(mount)
		if !bind && strings.HasPrefix(p, dst+"/") {
			return
		}
	}
	t.Fatalf("%s is no file the container has and lies in none of its volumes", p)
}

package helmtest

import (
	"net"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/metricsserver"
)

// Placeholders for values a pod reads at run time: its Secrets' files and its name.
const (
	placeholderDatabaseURL = "postgres://mantis:placeholder@postgres:5432/mantis"
	placeholderSecret      = "placeholder-secret-value"
	placeholderPodName     = "mantis-component-5d8f7c9b6-x2x7q"
)

// Mandible's health paths (internal/mandible/httpapi routes them).
const (
	mandibleLivenessPath  = "/healthz"
	mandibleReadinessPath = "/readyz"
)

// secretKeys are configuration keys whose values are secrets: they come from the
// environment, never from a ConfigMap.
var secretKeys = [][]string{
	{"database", "url"}, {"queue", "password"}, {"temporal", "api_key"}, {"analysis", "model_key"}, {"http", "tokens"},
}

// loaded is the configuration one container starts with.
type loaded struct {
	raw map[string]any // the rendered TOML
	cfg any            // config.Mandible, config.Thorax or config.Agent
}

// checkConfigs loads every container's rendered configuration with the process's
// own loader and environment, and checks that its files are mounted, that no
// secret is in a ConfigMap, and that its ports are the ones probed and exposed.
func checkConfigs(t *testing.T, m *manifests) {
	t.Helper()
	used := map[string]bool{}
	for name, d := range m.Deployments {
		pod := d.Spec.Template.Spec
		for _, c := range pod.Containers {
			l, cm := loadConfig(t, m, pod, c)
			used[cm] = true
			for _, key := range secretKeys {
				require.False(t, defined(l.raw, key...), "%s: %s must come from a Secret, not the ConfigMap", name, strings.Join(key, "."))
			}
			checkMountedPaths(t, m, pod, c, l.raw, nil)
			checkPorts(t, c, l.cfg)
		}
	}
	require.ElementsMatch(t, keys(m.ConfigMaps), keys(used), "every ConfigMap is some container's configuration")
}

// loadConfig reads the file --config names from the ConfigMap mounted there and
// loads it as the container's binary would, with its environment.
func loadConfig(t *testing.T, m *manifests, pod corev1.PodSpec, c corev1.Container) (loaded, string) {
	t.Helper()
	i := slices.Index(c.Args, "--config")
	require.True(t, i >= 0 && i+1 < len(c.Args), "%s: --config <path>", c.Name)
	file := c.Args[i+1]
	mount, rel := mountOf(c, file)
	require.NotNil(t, mount, "%s: %s is not mounted", c.Name, file)
	v := volume(pod, mount.Name)
	require.NotNil(t, v.ConfigMap, "%s: %s comes from a ConfigMap", c.Name, file)
	cm := m.ConfigMaps[v.ConfigMap.Name]
	require.NotNil(t, cm, "%s: ConfigMap %s is rendered", c.Name, v.ConfigMap.Name)
	text, ok := cm.Data[rel]
	require.True(t, ok, "%s: ConfigMap %s has no %s", c.Name, cm.Name, rel)

	var l loaded
	_, err := toml.Decode(text, &l.raw)
	require.NoError(t, err, "%s: %s is TOML", c.Name, file)
	root := materialize(t, m, pod, c)
	path := filepath.Join(root, file)
	require.NoError(t, os.WriteFile(path, []byte(rooted(c, root, text)), 0o600))
	env := containerEnv(t, c)
	switch bin := filepath.Base(c.Command[0]); bin {
	case "mandible":
		l.cfg, err = config.LoadMandible(path, env)
	case "thorax":
		l.cfg, err = config.LoadThorax(path, env)
	case "agent":
		l.cfg, err = config.LoadAgent(path, env)
	default:
		t.Fatalf("%s: unknown binary %s", c.Name, bin)
	}
	require.NoError(t, err, "%s: the process's loader refuses its configuration:\n%s", c.Name, text)
	return l, cm.Name
}

// materialize lays out the container's mounts under a temporary root: every
// directory, and in it the files a Secret, ConfigMap or projected volume holds,
// Secrets' with placeholders (the database URL one that parses as such).
func materialize(t *testing.T, m *manifests, pod corev1.PodSpec, c corev1.Container) string {
	t.Helper()
	root := t.TempDir()
	for _, vm := range c.VolumeMounts {
		dir := filepath.Join(root, vm.MountPath)
		require.NoError(t, os.MkdirAll(dir, 0o700))
		for _, f := range volumeFiles(m, *volume(pod, vm.Name)) {
			content := placeholderSecret
			if f == "database-url" {
				content = placeholderDatabaseURL + "\n"
			}
			require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o700))
			require.NoError(t, os.WriteFile(filepath.Join(dir, f), []byte(content), 0o600))
		}
	}
	return root
}

// rooted rewrites the quoted absolute paths of text that lie in the container's
// mounts to the same paths under root.
func rooted(c corev1.Container, root, text string) string {
	return quotedPath.ReplaceAllStringFunc(text, func(q string) string {
		if mount, _ := mountOf(c, strings.Trim(q, `"`)); mount != nil {
			return `"` + root + strings.Trim(q, `"`) + `"`
		}
		return q
	})
}

// quotedPath is a TOML string holding an absolute path.
var quotedPath = regexp.MustCompile(`"/[^"]*"`)

// containerEnv is the environment the container starts with, the downward
// API's pod name replaced by a placeholder.
func containerEnv(t *testing.T, c corev1.Container) func(string) (string, bool) {
	t.Helper()
	vars := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			vars[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			vars[e.Name] = placeholderPodName
		default:
			// Secrets are files (the *_file keys), never variables.
			t.Fatalf("%s: variable %s from an unexpected source", c.Name, e.Name)
		}
	}
	return func(name string) (string, bool) { v, ok := vars[name]; return v, ok }
}

// defined reports whether the TOML table raw holds the key path.
func defined(raw map[string]any, key ...string) bool {
	var v any = raw
	for _, k := range key {
		table, ok := v.(map[string]any)
		if !ok {
			return false
		}
		if v, ok = table[k]; !ok {
			return false
		}
	}
	return true
}

// isFileKey reports whether a configuration key names a file or a directory.
func isFileKey(key string) bool {
	return strings.HasSuffix(key, "_path") || strings.HasSuffix(key, "_file") || strings.HasSuffix(key, "dir")
}

// checkMountedPaths checks that every file or directory the configuration names is
// in a volume the container mounts and, for a Secret or ConfigMap, one of its files.
func checkMountedPaths(t *testing.T, m *manifests, pod corev1.PodSpec, c corev1.Container, raw map[string]any, prefix []string) {
	t.Helper()
	for k, v := range raw {
		key := append(slices.Clone(prefix), k)
		if table, ok := v.(map[string]any); ok {
			checkMountedPaths(t, m, pod, c, table, key)
			continue
		}
		s, ok := v.(string)
		if !ok || s == "" || !isFileKey(k) {
			continue
		}
		where := c.Name + ": " + strings.Join(key, ".")
		require.True(t, path.IsAbs(s), "%s: %q is not absolute", where, s)
		mount, rel := mountOf(c, s)
		require.NotNil(t, mount, "%s: %s is in no volume the container mounts", where, s)
		if rel == "" {
			continue // a directory: the mount itself
		}
		files := volumeFiles(m, *volume(pod, mount.Name))
		if files != nil {
			require.Contains(t, files, rel, "%s: volume %s holds no %s", where, mount.Name, rel)
		}
	}
}

// mountOf returns the container's mount that holds file and the file's path in it.
func mountOf(c corev1.Container, file string) (*corev1.VolumeMount, string) {
	var best *corev1.VolumeMount
	for i, vm := range c.VolumeMounts {
		if (file == vm.MountPath || strings.HasPrefix(file, vm.MountPath+"/")) &&
			(best == nil || len(vm.MountPath) > len(best.MountPath)) {
			best = &c.VolumeMounts[i]
		}
	}
	if best == nil {
		return nil, ""
	}
	return best, strings.TrimPrefix(strings.TrimPrefix(file, best.MountPath), "/")
}

// volumeFiles lists the files a Secret, ConfigMap or projected volume holds; nil
// when it cannot be known (a writable volume, or a Secret without items).
func volumeFiles(m *manifests, v corev1.Volume) []string {
	var files []string
	items := func(list []corev1.KeyToPath) {
		for _, it := range list {
			files = append(files, it.Path)
		}
	}
	switch {
	case v.Secret != nil && len(v.Secret.Items) > 0:
		items(v.Secret.Items)
	case v.ConfigMap != nil && len(v.ConfigMap.Items) > 0:
		items(v.ConfigMap.Items)
	case v.ConfigMap != nil:
		if cm := m.ConfigMaps[v.ConfigMap.Name]; cm != nil {
			files = keys(cm.Data)
		}
	case v.Projected != nil:
		for _, src := range v.Projected.Sources {
			if src.Secret == nil || len(src.Secret.Items) == 0 {
				return nil
			}
			items(src.Secret.Items)
		}
	default:
		return nil
	}
	return files
}

// checkPorts checks that the ports the configuration listens on are the
// container's named ports, and the probes ask the process's own health paths.
func checkPorts(t *testing.T, c corev1.Container, cfg any) {
	t.Helper()
	probe := func(p *corev1.Probe, path, listen string) {
		require.Equal(t, path, p.HTTPGet.Path, "%s: probe path", c.Name)
		port := containerPort(c, p.HTTPGet.Port.String())
		require.Equal(t, portOf(t, listen), port.ContainerPort, "%s: the probe asks the port %s listens on", c.Name, listen)
	}
	named := func(name, listen string) {
		port := containerPort(c, name)
		require.NotNil(t, port, "%s: port %s", c.Name, name)
		require.Equal(t, portOf(t, listen), port.ContainerPort, "%s: port %s is the configured %s", c.Name, name, listen)
	}
	switch cfg := cfg.(type) {
	case config.Mandible:
		probe(c.LivenessProbe, mandibleLivenessPath, cfg.HTTP.Listen)
		probe(c.ReadinessProbe, mandibleReadinessPath, cfg.HTTP.Listen)
		require.Equal(t, corev1.URISchemeHTTPS, c.LivenessProbe.HTTPGet.Scheme, "Mandible serves HTTPS")
		named("http", cfg.HTTP.Listen)
		named("grpc", cfg.GRPC.Listen)
	case config.Thorax:
		require.True(t, cfg.Metrics.Enabled(), "Thorax's probes need its metrics listener")
		probe(c.LivenessProbe, metricsserver.HealthPath, cfg.Metrics.Listen)
		probe(c.ReadinessProbe, metricsserver.HealthPath, cfg.Metrics.Listen)
		named("agents", cfg.Agents.Listen)
		named("metrics", cfg.Metrics.Listen)
	case config.Agent:
		require.True(t, cfg.Metrics.Enabled(), "the agent's probes need its metrics listener")
		probe(c.LivenessProbe, metricsserver.HealthPath, cfg.Metrics.Listen)
		probe(c.ReadinessProbe, metricsserver.HealthPath, cfg.Metrics.Listen)
		named("metrics", cfg.Metrics.Listen)
	}
}

func portOf(t *testing.T, addr string) int32 {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	n, err := net.LookupPort("tcp", port)
	require.NoError(t, err)
	return int32(n)
}

// checkThoraxDrain checks that the kubelet gives Thorax longer than its preStop
// hook and its drain.timeout before it kills it.
func checkThoraxDrain(t *testing.T, m *manifests) {
	t.Helper()
	d := m.Deployments["mantis-thorax"]
	require.NotNil(t, d)
	pod := d.Spec.Template.Spec
	l, _ := loadConfig(t, m, pod, pod.Containers[0])
	drain := l.cfg.(config.Thorax).Drain.Timeout.Duration
	var preStop time.Duration
	if lc := pod.Containers[0].Lifecycle; lc != nil && lc.PreStop != nil {
		require.False(t, dockerImages(t)["mantis"].HasShell)
		require.NotNil(t, lc.PreStop.Sleep, "Thorax's distroless image has no shell: a preStop hook can only be the kubelet's sleep")
		preStop = time.Duration(lc.PreStop.Sleep.Seconds) * time.Second
	}
	require.NotNil(t, pod.TerminationGracePeriodSeconds)
	grace := time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second
	require.Greater(t, grace, preStop+drain, "terminationGracePeriodSeconds must exceed preStop %s + drain.timeout %s", preStop, drain)
}

package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/config"
)

// undocumented is a configuration whose docs the tests write as source.
type undocumented struct {
	// Name names it.
	Name string `toml:"name"`
	Port int    `toml:"port"`
}

func docsOf(t *testing.T, src string) *goDocs {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "c.go"), []byte("package c\n\n"+src), 0o644))
	docs, err := parseDocs(dir)
	require.NoError(t, err)
	return docs
}

// A key whose field has no doc comment stops the generator, naming the key and the
// field; with one it is described by it.
func TestKeyWithoutDocCommentFails(t *testing.T) {
	t.Parallel()
	docs := docsOf(t, "type undocumented struct {\n\t// Name names it.\n\tName string\n\tPort int\n}\n")
	_, err := sections(undocumented{}, docs)
	require.ErrorContains(t, err, "port (undocumented.Port has no doc comment)")
	require.NotContains(t, err.Error(), "name (")

	docs = docsOf(t, "type undocumented struct {\n\t// Name names it.\n\tName string\n\t// Port is where it listens.\n\tPort int\n}\n")
	secs, err := sections(undocumented{}, docs)
	require.NoError(t, err)
	require.Len(t, secs, 1)
	require.Equal(t, "`port` is where it listens.", secs[0].Keys[1].Doc)
}

// The environment variable each page names is the one the loader reads: every
// variable a load looks up (besides DATABASE_URL, which the page of database.url
// explains) is documented, and every documented one is looked up.
func TestEnvNamesAreThoseTheLoaderReads(t *testing.T) {
	t.Parallel()
	for _, d := range daemons() {
		var documented []string
		for _, k := range config.Keys(d.Config) {
			require.Equal(t, "MANTIS_"+strings.ToUpper(strings.Join(k.Path, "_")), k.Env, k.Key)
			documented = append(documented, k.Env)
		}
		var read []string
		lookup := func(name string) (string, bool) {
			if name != "DATABASE_URL" {
				read = append(read, name)
			}
			return "", false
		}
		switch d.Config.(type) {
		case config.Mandible:
			_, _ = config.LoadMandible("", lookup)
		case config.Thorax:
			_, _ = config.LoadThorax("", lookup)
		case config.Agent:
			_, _ = config.LoadAgent("", lookup)
		}
		slices.Sort(documented)
		slices.Sort(read)
		require.Equal(t, documented, slices.Compact(read), d.Name)
	}
}

func TestProseNamesKeysNotGoFields(t *testing.T) {
	t.Parallel()
	keys := map[string]string{"URL": "url", "DirectURL": "direct_url", "Insecure": "insecure", "CACertPath": "ca_cert_path"}
	require.Equal(t, "`direct_url` reaches PostgreSQL. Empty means URL.",
		prose("DirectURL reaches\n\tPostgreSQL. Empty means URL.", "DirectURL", keys))
	require.Equal(t, "`url` is a connection URL; see `direct_url`.",
		prose("URL is a connection URL; see DirectURL.", "URL", keys))
	require.Equal(t, "`insecure` needs no `ca_cert_path`; set `insecure`, and URL or TLS stay.",
		prose("Insecure needs no CACertPath; set Insecure, and URL or TLS stay.", "Insecure", keys))
}

func TestTOMLValues(t *testing.T) {
	t.Parallel()
	require.Equal(t, `"2m"`, tomlValue(config.Duration{Duration: 2 * time.Minute}))
	require.Equal(t, `"720h"`, tomlValue(config.Duration{Duration: 30 * 24 * time.Hour}))
	require.Equal(t, `"1m30s"`, tomlValue(config.Duration{Duration: 90 * time.Second}))
	require.Equal(t, `["a", "b"]`, tomlValue([]string{"a", "b"}))
	require.Equal(t, `{ "a" = "1", "b" = "2" }`, tomlValue(map[string]string{"b": "2", "a": "1"}))
	require.Equal(t, "1", tomlValue(config.Ratio("")))
	require.Equal(t, "&lt;key id&gt; `<name>` a\\|b", cell("<key id> `<name>` a|b"))
}

// Each sample names every key of its process, set or commented out, in its section.
func TestSamplesHoldEveryKey(t *testing.T) {
	t.Parallel()
	docs, err := parseDocs(filepath.Join("..", "..", "internal", "config"))
	require.NoError(t, err)
	for _, d := range daemons() {
		for _, s := range d.Samples {
			text, err := sampleFile(d, s, docs)
			require.NoError(t, err)
			section := ""
			seen := map[string]bool{}
			for _, line := range strings.Split(text, "\n") {
				if m := regexp.MustCompile(`^(?:# )?\[([a-z_.]+)\]$`).FindStringSubmatch(line); m != nil {
					section = m[1] + "."
				} else if m := regexp.MustCompile(`^(?:# )?([a-z_]+) = `).FindStringSubmatch(line); m != nil {
					seen[section+m[1]] = true
				}
			}
			for _, k := range config.Keys(d.Config) {
				require.True(t, seen[k.Key], "%s lacks %s", s.File, k.Key)
			}
		}
	}
}

// The committed pages and samples are what the code generates (make docs-check
// says the same with a diff), and a page changed by hand is found.
func TestCommittedFilesAreUpToDate(t *testing.T) {
	if testing.Short() {
		t.Skip("builds mantisctl")
	}
	root := filepath.Join("..", "..")
	files, err := generate(root)
	require.NoError(t, err)
	dirs := map[string]string{".md": filepath.Join(root, "docs", "reference"), ".toml": filepath.Join(root, "deploy")}
	require.Empty(t, stale(files, dirs), "run make docs")

	edited := t.TempDir()
	for name, content := range files {
		if filepath.Ext(name) == ".md" {
			require.NoError(t, os.WriteFile(filepath.Join(edited, name), []byte(content), 0o644))
		}
	}
	require.NoError(t, os.WriteFile(filepath.Join(edited, "metrics.md"), []byte(files["metrics.md"]+"edited\n"), 0o644))
	dirs[".md"] = edited
	require.Equal(t, []string{"metrics.md"}, stale(files, dirs))
}

// stale lists the generated files whose copy in dirs (by extension) differs.
func stale(files map[string]string, dirs map[string]string) []string {
	var out []string
	for name, content := range files {
		b, err := os.ReadFile(filepath.Join(dirs[filepath.Ext(name)], name))
		if err != nil || string(b) != content {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// Every family is found with its type, labels and processes, the gauges read at
// scrape time included, without a server.
func TestMetricFamiliesFromTheRegistries(t *testing.T) {
	t.Parallel()
	fams, err := families()
	require.NoError(t, err)
	byName := map[string]family{}
	for _, f := range fams {
		require.True(t, strings.HasPrefix(f.Name, "mantis_"), f.Name)
		require.NotEmpty(t, f.Help, f.Name)
		byName[f.Name] = f
	}
	require.Equal(t, family{Name: "mantis_dlq_messages", Type: "gauge",
		Help: "Messages in the dead-letter queue: nudges given up on after their retries.", Processes: []string{"Mandible"}},
		byName["mantis_dlq_messages"])
	require.Equal(t, "gauge", byName["mantis_thorax_commands_held"].Type)
	require.Equal(t, []string{"status", "priority"}, byName["mantis_dispatch_queue_depth"].Labels)
	require.Equal(t, []string{"Mandible", "Thorax", "agent"}, byName["mantis_grpc_client_handled_total"].Processes)
	require.Equal(t, "histogram", byName["mantis_agent_command_duration_seconds"].Type)
}

// The exit-code table takes each Exit* constant's meaning from its doc comment, and
// refuses one that does not start with the constant's name.
func TestExitCodeTableFromConstants(t *testing.T) {
	t.Parallel()
	docs := docsOf(t, "const (\n\t// ExitOK: it worked.\n\tExitOK = 0\n\t// ExitNo: it did\n\t// not.\n\tExitNo = 1\n)\n")
	table, err := exitCodeTable(docs)
	require.NoError(t, err)
	require.Equal(t, "| exit code | meaning |\n|---|---|\n| 0 | it worked. |\n| 1 | it did not. |\n", table)
	_, err = exitCodeTable(docsOf(t, "// Says nothing of its name.\nconst ExitOK = 0\n"))
	require.ErrorContains(t, err, "ExitOK")
}

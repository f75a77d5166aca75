package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// writeTree writes files (slash paths relative to the returned root).
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, body := range files {
		path := filepath.Join(root, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(body), 0o644))
	}
	return root
}

// goodTree is a tree every rule accepts; each test breaks one thing of it.
func goodTree() map[string]string {
	return map[string]string{
		"README.md":                                "# Mantis\n\nSee [the docs](docs/README.md) and [architecture](ARCHITECTURE.md).\n",
		"ARCHITECTURE.md":                          "# Architecture\n\nRequest 2f0c6a1e-5b7d-4c1a-9e0f-3a2b1c0d9e8f is a UUID, not a hash.\n",
		"CONTRIBUTING.md":                          "# Contributing\n\nBase commit cf4e44d74cf7 is fine here.\n",
		"docs/README.md":                           "# Docs\n\n- [Guide](guides/specs.md)\n- [Limits](operations/known-limits.md#top)\n",
		"docs/guides/specs.md":                     "# Specs\n\n```sh\nmantisctl logs --since 7d\n```\n\nBack to [the index](../README.md).\n",
		"docs/operations/known-limits.md":          "# Limits\n",
		"bench/results/2026-12-07-abc1234-soak.md": "load average 1.9 on 2026-12-07 at abc1234\n",
	}
}

func lint(t *testing.T, files map[string]string) []string {
	t.Helper()
	findings, err := lintTree(writeTree(t, files))
	require.NoError(t, err)
	var out []string
	for _, f := range findings {
		out = append(out, f.String())
	}
	return out
}

func TestGoodTreePasses(t *testing.T) {
	require.Empty(t, lint(t, goodTree()))
}

func TestRules(t *testing.T) {
	cases := map[string]struct {
		file, body, want string
	}{
		"readme too long":    {"README.md", strings.Repeat("line\n", maxReadmeLines+1), "README.md: 201 lines"},
		"page not indexed":   {"docs/guides/orphan.md", "# Orphan\n", "docs/guides/orphan.md: not linked from docs/README.md"},
		"broken link":        {"docs/guides/specs.md", "See [limits](../operations/limits.md).\n", "docs/guides/specs.md:1: link to ../operations/limits.md: no such file"},
		"date in a guide":    {"docs/guides/specs.md", "Measured on 2026-12-04.\n", "docs/guides/specs.md:1: a date"},
		"hash in readme":     {"README.md", "Since 7354e50 the claim is faster.\n", `README.md:1: "7354e50" looks like a commit hash`},
		"load average":       {"ARCHITECTURE.md", "The load average was 1.9.\n", "ARCHITECTURE.md:1: a load average"},
		"process word":       {"ARCHITECTURE.md", "The seed's retry steps.\n", `ARCHITECTURE.md:1: "seed"`},
		"not kept":           {"docs/operations/known-limits.md", "An experiment, not kept.\n", `docs/operations/known-limits.md:1: "not kept"`},
		"date in code":       {"docs/guides/specs.md", "```\nok 2026-12-04 run\n```\n", "docs/guides/specs.md:2: a date"},
		"contributing links": {"CONTRIBUTING.md", "Read [this](docs/nowhere.md).\n", "CONTRIBUTING.md:1: link to docs/nowhere.md: no such file"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			files := goodTree()
			files[c.file] = c.body
			got := strings.Join(lint(t, files), "\n")
			require.Contains(t, got, c.want)
		})
	}
}

// A results file may be linked by its dated name; the words of a link are checked.
func TestLinkTargetsMayCarryDates(t *testing.T) {
	files := goodTree()
	files["docs/operations/known-limits.md"] = "# Limits\n\nSee [the soak](../../bench/results/2026-12-07-abc1234-soak.md).\n"
	require.Empty(t, lint(t, files))
	files["docs/operations/known-limits.md"] = "See [the soak of 2026-12-07](../../bench/results/2026-12-07-abc1234-soak.md).\n"
	require.Contains(t, strings.Join(lint(t, files), "\n"), "known-limits.md:1: a date")
}

func TestAllowMarkLetsALineThrough(t *testing.T) {
	files := goodTree()
	files["docs/guides/specs.md"] = "Output older than 2026-11-01 is gone. " + allowMark + "\n"
	require.Empty(t, lint(t, files))
}

// TestRepositoryDocs runs the rules on this repository, so that `go test ./...` fails
// as `make lint` does when a page is orphaned, a link broken or a figure left in prose.
func TestRepositoryDocs(t *testing.T) {
	findings, err := lintTree(filepath.Join("..", ".."))
	require.NoError(t, err)
	var lines []string
	for _, f := range findings {
		lines = append(lines, f.String())
	}
	require.Empty(t, lines)
}

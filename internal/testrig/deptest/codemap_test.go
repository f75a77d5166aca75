package deptest_test

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// codemapSection is the heading of ARCHITECTURE.md's table of packages.
const codemapSection = "## Packages"

// backticked finds the `quoted` names of a table cell.
var backticked = regexp.MustCompile("`([^`]+)`")

// TestCodemapNamesEveryInternalPackage holds ARCHITECTURE.md's package table to the
// tree: every package under internal/ (go list's, so testdata is left out) is named in
// the first cell of a row, and every path a first cell names is a package of the
// module. A package that moves or appears without its row fails here, as does a row
// left behind.
func TestCodemapNamesEveryInternalPackage(t *testing.T) {
	t.Parallel()
	root := moduleRoot(t)
	doc, err := os.ReadFile(filepath.Join(root, "ARCHITECTURE.md"))
	require.NoError(t, err)
	unnamed, unknown := codemapMismatch(codemapPaths(t, doc), modulePackages(t, root))
	if len(unnamed) > 0 {
		t.Errorf("packages with no row in ARCHITECTURE.md's %q table: %s", codemapSection, strings.Join(unnamed, ", "))
	}
	if len(unknown) > 0 {
		t.Errorf("ARCHITECTURE.md's %q table names paths that are not packages: %s", codemapSection, strings.Join(unknown, ", "))
	}
}

// The check itself, on a codemap of its own: a package without a row and a row
// without a package are both found, and a row's second cell is not read.
func TestCodemapFindsUnnamedPackagesAndUnknownRows(t *testing.T) {
	t.Parallel()
	doc := []byte("# x\n\n## Packages\n\n| package | holds |\n|---|---|\n" +
		"| `internal/a`, `internal/gone/` | a; see `internal/b` |\n| `api/` | the docs |\n\n" +
		"## Later\n\n| `internal/later` | not the package table |\n")
	named := codemapPaths(t, doc)
	require.Equal(t, []string{"internal/a", "internal/gone", "api"}, named)
	unnamed, unknown := codemapMismatch(named, []string{"api", "internal/a", "internal/b", "workflows"})
	require.Equal(t, []string{"internal/b"}, unnamed)
	require.Equal(t, []string{"internal/gone"}, unknown)
}

// codemapMismatch returns the packages under internal/ that named leaves out, and the
// names that are not packages.
func codemapMismatch(named, pkgs []string) (unnamed, unknown []string) {
	for _, p := range pkgs {
		if strings.HasPrefix(p, "internal/") && !slices.Contains(named, p) {
			unnamed = append(unnamed, p)
		}
	}
	for _, p := range named {
		if !slices.Contains(pkgs, p) {
			unknown = append(unknown, p)
		}
	}
	return unnamed, unknown
}

// codemapPaths returns the paths named in the first cell of each row of the
// package table, in order, without a trailing slash.
func codemapPaths(t *testing.T, doc []byte) []string {
	t.Helper()
	var paths []string
	in, rows := false, 0
	sc := bufio.NewScanner(bytes.NewReader(doc))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == codemapSection:
			in = true
			continue
		case in && strings.HasPrefix(line, "## "):
			in = false
		}
		if !in || !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) < 3 {
			continue
		}
		rows++
		for _, m := range backticked.FindAllStringSubmatch(cells[1], -1) {
			paths = append(paths, strings.TrimSuffix(m[1], "/"))
		}
	}
	require.NoError(t, sc.Err())
	require.NotZero(t, rows, "ARCHITECTURE.md has no table under %q", codemapSection)
	require.NotEmpty(t, paths, "ARCHITECTURE.md's %q table names no package", codemapSection)
	return paths
}

// moduleRoot is the directory of the module's go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	require.NoError(t, err)
	return filepath.Dir(strings.TrimSpace(string(out)))
}

// modulePackages lists the module's packages as paths from its root.
func modulePackages(t *testing.T, root string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	require.NoError(t, err)
	modCmd := exec.Command("go", "list", "-m")
	modCmd.Dir = root
	mod, err := modCmd.Output()
	require.NoError(t, err)
	prefix := strings.TrimSpace(string(mod)) + "/"
	var pkgs []string
	for _, p := range strings.Fields(string(out)) {
		pkgs = append(pkgs, strings.TrimPrefix(p, prefix))
	}
	return pkgs
}

package deptest_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/testrig/deptest"
)

// fixture writes a module of its own, example.com/fixture, whose packages import each
// other in a line and reach the network only at its end:
//
//	a → b → c → net, and a → strings
//	tagged → net, with the build tag "extra" only
//	clean → strings, and its test → c
//	testonly, which has test files only
//
// The checker runs go list in it, so what it must find is known exactly. GOWORK is
// off so that no workspace of the caller's takes the module in.
func fixture(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":              "module example.com/fixture\n\ngo 1.22\n",
		"a/a.go":              "package a\n\nimport (\n\t_ \"example.com/fixture/b\"\n\t_ \"strings\"\n)\n",
		"b/b.go":              "package b\n\nimport _ \"example.com/fixture/c\"\n",
		"c/c.go":              "package c\n\nimport _ \"net\"\n",
		"tagged/tagged.go":    "package tagged\n",
		"tagged/extra.go":     "//go:build extra\n\npackage tagged\n\nimport _ \"net\"\n",
		"clean/clean.go":      "package clean\n\nimport _ \"strings\"\n",
		"clean/clean_test.go": "package clean\n\nimport _ \"example.com/fixture/c\"\n",
		"testonly/x_test.go":  "package testonly\n",
	}
	for name, body := range files {
		path := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(body), 0o644))
	}
	t.Setenv("GOWORK", "off")
	return dir
}

const (
	pkgA = "example.com/fixture/a"
	pkgB = "example.com/fixture/b"
	pkgC = "example.com/fixture/c"
)

func violations(t *testing.T, c deptest.DepChecker) []deptest.Violation {
	t.Helper()
	vs, err := c.Violations()
	require.NoError(t, err)
	return vs
}

func TestBadDepIsNamedWithTheChainFromThePackage(t *testing.T) {
	dir := fixture(t)
	vs := violations(t, deptest.DepChecker{Dir: dir, Packages: []string{"./a"},
		BadDeps: map[string]string{pkgC: "c is bad", "net": "no network"}})
	require.Equal(t, []deptest.Violation{
		{Rule: "links " + pkgC, Why: "c is bad", Chains: [][]string{{pkgA, pkgB, pkgC}}},
		{Rule: "links net", Why: "no network", Chains: [][]string{{pkgA, pkgB, pkgC, "net"}}},
	}, vs)
}

// A chain stops at the first package its rule matches: "net/..." matches net and
// net/netip, which net imports, but only net is reported.
func TestBadDepStopsAtTheFirstOffender(t *testing.T) {
	dir := fixture(t)
	vs := violations(t, deptest.DepChecker{Dir: dir, Packages: []string{"./a"},
		BadDeps: map[string]string{"net/...": "no network"}})
	require.Equal(t, []deptest.Violation{
		{Rule: "links net/...", Why: "no network", Chains: [][]string{{pkgA, pkgB, pkgC, "net"}}},
	}, vs)
}

func TestBadImportCountsDirectImportsOnly(t *testing.T) {
	dir := fixture(t)
	rule := map[string]string{"net": "not directly"}
	require.Empty(t, violations(t, deptest.DepChecker{Dir: dir, Packages: []string{"./a"}, BadImports: rule}),
		"a links net only through b and c")
	require.Equal(t, []deptest.Violation{
		{Rule: "imports net", Why: "not directly", Chains: [][]string{{pkgC, "net"}}},
	}, violations(t, deptest.DepChecker{Dir: dir, Packages: []string{"./c"}, BadImports: rule}))
}

func TestAllowDepsNamesTheFirstPackageOutside(t *testing.T) {
	dir := fixture(t)
	vs := violations(t, deptest.DepChecker{Dir: dir, Packages: []string{"./a"},
		AllowDeps: []string{"std"}, AllowWhy: "standard library only"})
	require.Equal(t, []deptest.Violation{
		{Rule: "links outside std", Why: "standard library only", Chains: [][]string{{pkgA, pkgB}}},
	}, vs)
	require.Empty(t, violations(t, deptest.DepChecker{Dir: dir, Packages: []string{"./a"},
		AllowDeps: []string{"std", "example.com/fixture/..."}}))
}

func TestTestFilesDoNotCount(t *testing.T) {
	dir := fixture(t)
	require.Empty(t, violations(t, deptest.DepChecker{Dir: dir, Packages: []string{"./clean"},
		BadDeps: map[string]string{pkgC: "c is bad"}}))
}

func TestTagsAndGOOSChooseTheBuild(t *testing.T) {
	dir := fixture(t)
	rule := map[string]string{"net": "no network"}
	require.Empty(t, violations(t, deptest.DepChecker{Dir: dir, Packages: []string{"./tagged"}, BadDeps: rule}))
	require.Equal(t, [][]string{{"example.com/fixture/tagged", "net"}},
		violations(t, deptest.DepChecker{Dir: dir, Packages: []string{"./tagged"}, Tags: []string{"extra"}, BadDeps: rule})[0].Chains)

	windows := map[string]string{"internal/syscall/windows": "not on linux"}
	require.Empty(t, violations(t, deptest.DepChecker{Packages: []string{"os"}, GOOS: "linux", GOARCH: "amd64", BadDeps: windows}))
	require.Equal(t, []string{"os", "internal/syscall/windows"},
		violations(t, deptest.DepChecker{Packages: []string{"os"}, GOOS: "windows", GOARCH: "amd64", BadDeps: windows})[0].Chains[0])
}

// The standard library's net/http imports net itself, so both kinds of rule catch it.
func TestNetHTTPLinksNet(t *testing.T) {
	t.Parallel()
	vs := violations(t, deptest.DepChecker{Packages: []string{"net/http"},
		BadDeps: map[string]string{"net": "linked"}, BadImports: map[string]string{"net": "imported"}})
	require.Equal(t, []deptest.Violation{
		{Rule: "imports net", Why: "imported", Chains: [][]string{{"net/http", "net"}}},
		{Rule: "links net", Why: "linked", Chains: [][]string{{"net/http", "net"}}},
	}, vs)
}

// recorder is a testing.TB that keeps the errors reported to it.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func TestCheckFailsTheTestNamingTheChain(t *testing.T) {
	dir := fixture(t)
	r := &recorder{TB: t}
	deptest.DepChecker{Dir: dir, Packages: []string{"./a"}, BadDeps: map[string]string{"net": "no network"}}.Check(r)
	require.Equal(t, []string{"links net (no network):\n\t" + pkgA + " → " + pkgB + " → " + pkgC + " → net"}, r.errs)

	r = &recorder{TB: t}
	deptest.DepChecker{Dir: dir, Packages: []string{"./clean"}, BadDeps: map[string]string{"net": "no network"}}.Check(r)
	require.Empty(t, r.errs)
}

func TestViolationPrintsAFewChains(t *testing.T) {
	t.Parallel()
	v := deptest.Violation{Rule: "links x", Why: "why"}
	for i := range 7 {
		v.Chains = append(v.Chains, []string{"root", fmt.Sprint("x", i)})
	}
	require.Equal(t, "links x (why):\n\troot → x0\n\troot → x1\n\troot → x2\n\troot → x3\n\troot → x4\n\t… and 2 more", v.String())
}

func TestGoListFailureIsAnError(t *testing.T) {
	dir := fixture(t)
	_, err := deptest.DepChecker{Dir: dir, Packages: []string{"./missing"}}.Violations()
	require.ErrorContains(t, err, "missing")
}

func TestPackageWithoutCodeIsAnError(t *testing.T) {
	dir := fixture(t)
	_, err := deptest.DepChecker{Dir: dir, Packages: []string{"./testonly"}, AllowDeps: []string{"std"}}.Violations()
	require.EqualError(t, err, "example.com/fixture/testonly has no Go files to check in this build")
}

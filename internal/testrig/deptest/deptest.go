// Package deptest holds dependency rules as tests, after Tailscale's tstest/deptest: a
// package's deps_test.go states what it must not link or import, with why, and
// DepChecker checks it against `go list -deps`. A broken rule fails the test with the
// chain of imports that brought the package in, from the package under test to the
// offending one, since that chain is what a developer has to cut.
//
// Rules are of three kinds:
//   - BadDeps: packages that must not be linked at all, directly or through others;
//   - BadImports: packages that must not be imported directly (linking them through
//     another package, such as net/http through the Temporal SDK, is allowed);
//   - AllowDeps: when set, the only packages that may be linked.
//
// Patterns are import paths; "p/..." matches p and every package below it, and "std"
// matches the standard library.
package deptest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
)

// maxChains bounds the chains a violation prints: past a few, the rest only repeat
// the lesson.
const maxChains = 5

// DepChecker is one set of dependency rules over a set of packages.
type DepChecker struct {
	// Packages are the packages under test, as go list takes them: import paths, or
	// directories relative to Dir. "." when empty, the test's own package.
	Packages []string
	// Dir is where go list runs; the current directory (under go test, the package's
	// directory) when empty.
	Dir string
	// GOOS, GOARCH and Tags are the build the rules hold for; the host's, untagged,
	// when empty.
	GOOS   string
	GOARCH string
	Tags   []string

	// BadDeps are the packages that must not be linked: pattern ⇒ why.
	BadDeps map[string]string
	// BadImports are the packages that must not be imported directly: pattern ⇒ why.
	BadImports map[string]string
	// AllowDeps, when not nil, are the only packages that may be linked besides
	// Packages themselves; AllowWhy says why.
	AllowDeps []string
	AllowWhy  string
}

// Violation is one broken rule and the chains of imports that break it.
type Violation struct {
	// Rule is what was broken: "links <pattern>", "imports <pattern>" or
	// "links outside <patterns>".
	Rule string
	// Why is the rule's reason.
	Why string
	// Chains run each from a package under test to an offending package, shortest
	// first. A chain stops at the first offending package on its way: cutting that
	// import cuts what lies behind it.
	Chains [][]string
}

// String is the violation as a test failure prints it.
func (v Violation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s):", v.Rule, v.Why)
	for i, c := range v.Chains {
		if i == maxChains {
			fmt.Fprintf(&b, "\n\t… and %d more", len(v.Chains)-maxChains)
			break
		}
		b.WriteString("\n\t" + strings.Join(c, " → "))
	}
	return b.String()
}

// Check fails t with one error per broken rule, each naming the chains of imports
// that break it; it stops t when go list fails.
func (c DepChecker) Check(t testing.TB) {
	t.Helper()
	vs, err := c.Violations()
	if err != nil {
		t.Fatalf("deptest: %v", err)
	}
	for _, v := range vs {
		t.Errorf("%s", v)
	}
}

// Violations lists the broken rules, in a stable order: BadImports, then BadDeps, by
// pattern, then the allow-list.
func (c DepChecker) Violations() ([]Violation, error) {
	g, err := c.load()
	if err != nil {
		return nil, err
	}
	var vs []Violation
	for _, pat := range slices.Sorted(maps.Keys(c.BadImports)) {
		var chains [][]string
		for _, root := range g.roots {
			for _, imp := range g.pkgs[root].Imports {
				if g.matches(pat, imp) {
					chains = append(chains, []string{root, imp})
				}
			}
		}
		if len(chains) > 0 {
			vs = append(vs, Violation{Rule: "imports " + pat, Why: c.BadImports[pat], Chains: chains})
		}
	}
	for _, pat := range slices.Sorted(maps.Keys(c.BadDeps)) {
		if chains := g.chainsTo(func(p string) bool { return g.matches(pat, p) }); len(chains) > 0 {
			vs = append(vs, Violation{Rule: "links " + pat, Why: c.BadDeps[pat], Chains: chains})
		}
	}
	if c.AllowDeps != nil {
		outside := func(p string) bool {
			if slices.Contains(g.roots, p) {
				return false
			}
			return !slices.ContainsFunc(c.AllowDeps, func(pat string) bool { return g.matches(pat, p) })
		}
		if chains := g.chainsTo(outside); len(chains) > 0 {
			vs = append(vs, Violation{
				Rule:   "links outside " + strings.Join(c.AllowDeps, ", "),
				Why:    c.AllowWhy,
				Chains: chains,
			})
		}
	}
	return vs, nil
}

// listedPackage is what go list -json says of one package.
type listedPackage struct {
	ImportPath string
	Imports    []string
	Standard   bool
	DepOnly    bool
	GoFiles    []string
	CgoFiles   []string
	Error      *struct{ Err string }
}

// graph is the import graph go list -deps gave.
type graph struct {
	roots []string // the packages under test, sorted
	pkgs  map[string]*listedPackage
}

// load runs go list -deps over the packages under test.
func (c DepChecker) load() (*graph, error) {
	pkgs := c.Packages
	if len(pkgs) == 0 {
		pkgs = []string{"."}
	}
	args := []string{"list", "-deps", "-json=ImportPath,Imports,Standard,DepOnly,GoFiles,CgoFiles,Error"}
	if len(c.Tags) > 0 {
		args = append(args, "-tags="+strings.Join(c.Tags, ","))
	}
	args = append(args, pkgs...)
	cmd := exec.Command("go", args...)
	cmd.Dir = c.Dir
	cmd.Env = os.Environ()
	if c.GOOS != "" {
		cmd.Env = append(cmd.Env, "GOOS="+c.GOOS)
	}
	if c.GOARCH != "" {
		cmd.Env = append(cmd.Env, "GOARCH="+c.GOARCH)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	g := &graph{pkgs: map[string]*listedPackage{}}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		p := new(listedPackage)
		if err := dec.Decode(p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("reading go list's answer: %w", err)
		}
		if p.Error != nil {
			return nil, fmt.Errorf("go list: %s: %s", p.ImportPath, p.Error.Err)
		}
		// "C" is cgo's pseudo-package: listed among imports, never as a package.
		p.Imports = slices.DeleteFunc(p.Imports, func(imp string) bool { return imp == "C" })
		g.pkgs[p.ImportPath] = p
		if !p.DepOnly {
			// A rule over no code holds whatever it says: a misspelt path, or a
			// package whose files are all tests or all for other platforms.
			if len(p.GoFiles)+len(p.CgoFiles) == 0 {
				return nil, fmt.Errorf("%s has no Go files to check in this build", p.ImportPath)
			}
			g.roots = append(g.roots, p.ImportPath)
		}
	}
	sort.Strings(g.roots)
	return g, nil
}

// matches reports whether the package at path matches pattern.
func (g *graph) matches(pattern, path string) bool {
	if pattern == "std" {
		p, ok := g.pkgs[path]
		return ok && p.Standard
	}
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == base || strings.HasPrefix(path, base+"/")
	}
	return path == pattern
}

// chainsTo walks the graph breadth first from the roots and returns the shortest
// chain to each package bad reports, without walking on through a bad package.
func (g *graph) chainsTo(bad func(string) bool) [][]string {
	parent := map[string]string{}
	seen := map[string]bool{}
	var queue []string
	for _, r := range g.roots {
		seen[r] = true
		queue = append(queue, r)
	}
	var chains [][]string
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if bad(p) {
			chain := []string{p}
			for q, ok := parent[p]; ok; q, ok = parent[q] {
				chain = append(chain, q)
			}
			slices.Reverse(chain)
			chains = append(chains, chain)
			continue
		}
		for _, imp := range g.pkgs[p].Imports {
			if !seen[imp] {
				seen[imp] = true
				parent[imp] = p
				queue = append(queue, imp)
			}
		}
	}
	return chains
}

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// rigDir is where the test rigs live, relative to the module's root: a test binary
// that links any package under it needs a server.
const rigDir = "internal/testrig/"

// listed is one package of `go list -test -json`.
type listed struct {
	ImportPath   string
	Dir          string
	ForTest      string
	Deps         []string
	TestGoFiles  []string
	XTestGoFiles []string
	Module       *struct{ Path string }
	Error        *struct{ Err string }
}

// module is the module's packages as go list saw them.
type module struct {
	path string
	// pkgs are the packages themselves, by import path.
	pkgs map[string]listed
	// testMains are the test binaries' main packages ("P.test"), by P.
	testMains map[string]listed
}

// listModule runs go list over every package of the module in dir.
func listModule(dir string) (*module, error) {
	cmd := exec.Command("go", "list", "-e", "-test",
		"-json=ImportPath,Dir,ForTest,Deps,TestGoFiles,XTestGoFiles,Module,Error", "./...")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	m := &module{pkgs: map[string]listed{}, testMains: map[string]listed{}}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("reading go list: %w", err)
		}
		if p.Error != nil {
			return nil, fmt.Errorf("go list: %s: %s", p.ImportPath, p.Error.Err)
		}
		switch {
		case strings.HasSuffix(p.ImportPath, ".test"):
			m.testMains[strings.TrimSuffix(p.ImportPath, ".test")] = p
		case p.ForTest == "" && !strings.Contains(p.ImportPath, " "):
			m.pkgs[p.ImportPath] = p
			if p.Module != nil {
				m.path = p.Module.Path
			}
		}
	}
	if m.path == "" {
		return nil, errors.New("go list found no package of a module")
	}
	return m, nil
}

// rel is a package's directory relative to the module's root, as ./dir.
func (m *module) rel(importPath string) string {
	return "./" + strings.TrimPrefix(strings.TrimPrefix(importPath, m.path), "/")
}

// fastPackages are the packages with tests whose test binary links no test rig.
func (m *module) fastPackages() []string {
	rig := m.path + "/" + rigDir
	var out []string
	for path, main := range m.testMains {
		slow := false
		for _, dep := range main.Deps {
			// A package compiled for a test is listed as "P [Q.test]".
			dep, _, _ = strings.Cut(dep, " ")
			if strings.HasPrefix(dep+"/", rig) {
				slow = true
				break
			}
		}
		if !slow {
			out = append(out, m.rel(path))
		}
	}
	sort.Strings(out)
	return out
}

// testFunc is one top-level function of a test file.
type testFunc struct {
	pkg  string // ./dir
	decl *ast.FuncDecl
}

// testFuncs parses the test files of every package and returns their functions
// whose names start with prefix and are test names to go test (TestX, FuzzX).
func (m *module) testFuncs(prefix string) ([]testFunc, error) {
	var out []testFunc
	fset := token.NewFileSet()
	for path, p := range m.pkgs {
		for _, name := range append(append([]string(nil), p.TestGoFiles...), p.XTestGoFiles...) {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.ParseComments|parser.SkipObjectResolution)
			if err != nil {
				return nil, err
			}
			for _, d := range f.Decls {
				fn, ok := d.(*ast.FuncDecl)
				if ok && fn.Recv == nil && isTestName(fn.Name.Name, prefix) {
					out = append(out, testFunc{pkg: m.rel(path), decl: fn})
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].pkg != out[j].pkg {
			return out[i].pkg < out[j].pkg
		}
		return out[i].decl.Name.Name < out[j].decl.Name.Name
	})
	return out, nil
}

// isTestName reports whether go test takes name as a function of its kind prefix:
// the prefix alone, or followed by anything but a lower-case letter.
func isTestName(name, prefix string) bool {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return false
	}
	r, _ := utf8.DecodeRuneInString(rest)
	return rest == "" || !unicode.IsLower(r)
}

// fuzzTargets are every fuzz target, as package:FuzzName with the package's
// directory relative to the module's root.
func (m *module) fuzzTargets() ([]string, error) {
	funcs, err := m.testFuncs("Fuzz")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, f := range funcs {
		out = append(out, strings.TrimPrefix(f.pkg, "./")+":"+f.decl.Name.Name)
	}
	return out, nil
}

// markedTests are the tests whose doc comment carries //mantis:name.
func (m *module) markedTests(name string) ([]testFunc, error) {
	funcs, err := m.testFuncs("Test")
	if err != nil {
		return nil, err
	}
	directive := "//mantis:" + name
	var out []testFunc
	for _, f := range funcs {
		if f.decl.Doc == nil {
			continue
		}
		for _, c := range f.decl.Doc.List {
			if strings.TrimSpace(c.Text) == directive {
				out = append(out, f)
				break
			}
		}
	}
	return out, nil
}

// runPattern is a go test -run pattern matching exactly tests' top-level names.
func runPattern(tests []testFunc) string {
	names := make([]string, len(tests))
	for i, t := range tests {
		names[i] = t.decl.Name.Name
	}
	sort.Strings(names)
	return "^(" + strings.Join(names, "|") + ")$"
}

// packagesOf are the distinct packages of tests, in order.
func packagesOf(tests []testFunc) []string {
	var out []string
	for _, t := range tests {
		if len(out) == 0 || out[len(out)-1] != t.pkg {
			out = append(out, t.pkg)
		}
	}
	return out
}

// Command codelint enforces the layout rules that go vet and staticcheck do not:
//
//   - no non-test function is longer than 80 lines;
//   - no file is longer than 400 lines, unless its first comment says why
//     (a line starting "Longer than 400 lines:");
//   - no SQL is written in a Go string literal: queries live in .sql files
//     (schema/queries) and reach Go through sqlc's generated code.
//
// Test files, generated files ("Code generated … DO NOT EDIT.") and the packages that
// exist only to run tests against real servers (testRigs) are exempt.
// It prints one line per finding, file:line: message, and exits 1 when there is any.
//
//	go run ./tools/codelint [dir]
package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

const (
	maxFuncLines = 80
	maxFileLines = 400
	longFileMark = "Longer than 400 lines:"
)

// sqlStart matches a string that begins like a SQL statement.
var sqlStart = regexp.MustCompile(`(?is)^\s*(select\s.+\sfrom\s|insert\s+into\s|update\s+\S+\s+set\s|delete\s+from\s|with\s+\w+\s+as\s*\(|create\s+(unique\s+)?(table|index|type|function|or\s+replace)\s|alter\s+table\s|drop\s+(table|index)\s|lock\s+table\s|select\s+pg_|(?-i:(UN)?LISTEN\s|NOTIFY\s))`)

// testRigs are the packages that only tests import: fault, soak and scale rigs that
// read the database to judge a run, not to run Mantis.
var testRigs = map[string]bool{
	"internal/testrig/faultenv": true, "internal/testrig/soak": true, "internal/testrig/chaos": true,
	"internal/testrig/e2e": true, "internal/testrig/testenv": true, "internal/testrig/scale": true,
}

var generated = regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`)

type finding struct {
	pos token.Position
	msg string
}

func main() {
	root := "."
	if len(os.Args) > 1 {
		root = os.Args[1]
	}
	findings, err := lintTree(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "codelint:", err)
		os.Exit(2)
	}
	for _, f := range findings {
		fmt.Printf("%s:%d: %s\n", f.pos.Filename, f.pos.Line, f.msg)
	}
	if len(findings) > 0 {
		fmt.Fprintf(os.Stderr, "codelint: %d finding(s)\n", len(findings))
		os.Exit(1)
	}
}

func lintTree(root string) ([]finding, error) {
	var out []finding
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if rel, err := filepath.Rel(root, path); err == nil && testRigs[filepath.ToSlash(rel)] {
				return filepath.SkipDir
			}
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor" || name == "node_modules") {
				return filepath.SkipDir
			}
			// A nested module is linted on its own.
			if path != root {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		fileFindings, err := lintFile(path)
		if err != nil {
			return err
		}
		out = append(out, fileFindings...)
		return nil
	})
	sort.Slice(out, func(i, j int) bool {
		if out[i].pos.Filename != out[j].pos.Filename {
			return out[i].pos.Filename < out[j].pos.Filename
		}
		return out[i].pos.Line < out[j].pos.Line
	})
	return out, err
}

func lintFile(path string) ([]finding, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if generated.Match(src) {
		return nil, nil
	}
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, path, src, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	var out []finding
	if lines := fset.File(file.Pos()).LineCount(); lines > maxFileLines && !saysWhyLong(file) {
		out = append(out, finding{fset.Position(file.Package),
			fmt.Sprintf("file has %d lines (limit %d) and its first comment does not say why (%q)", lines, maxFileLines, longFileMark)})
	}
	ast.Inspect(file, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncDecl:
			if n.Body == nil {
				return true
			}
			start, end := fset.Position(n.Pos()), fset.Position(n.End())
			if lines := end.Line - start.Line + 1; lines > maxFuncLines {
				out = append(out, finding{start, fmt.Sprintf("function %s has %d lines (limit %d)", funcName(n), lines, maxFuncLines)})
			}
		case *ast.BasicLit:
			if n.Kind != token.STRING {
				return true
			}
			if s, err := strconv.Unquote(n.Value); err == nil && sqlStart.MatchString(s) {
				out = append(out, finding{fset.Position(n.Pos()), "SQL in a Go string: move it to a .sql file under schema/queries"})
			}
		}
		return true
	})
	return out, nil
}

// saysWhyLong reports whether the file's first comment carries the long-file mark.
func saysWhyLong(file *ast.File) bool {
	if len(file.Comments) == 0 {
		return false
	}
	return strings.Contains(file.Comments[0].Text(), longFileMark)
}

func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	t := fn.Recv.List[0].Type
	if star, ok := t.(*ast.StarExpr); ok {
		t = star.X
	}
	if idx, ok := t.(*ast.IndexExpr); ok {
		t = idx.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fn.Name.Name
	}
	return fn.Name.Name
}

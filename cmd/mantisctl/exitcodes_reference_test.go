package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/apiclient"
)

// referenceExitTableHeader opens the exit-code table of the mantisctl reference.
const referenceExitTableHeader = "| exit code | meaning |"

// referencePath is the generated mantisctl reference (make docs), relative to this
// package.
var referencePath = filepath.Join("..", "..", "docs", "reference", "mantisctl.md")

var (
	// helpExitLine is a line of the --help text's "Exit codes:" block.
	helpExitLine = regexp.MustCompile(`^  (\d+)  (.+)$`)
	// httpStatus and flagName find what a row of either table names.
	httpStatus = regexp.MustCompile(`\b[45]\d\d\b`)
	flagName   = regexp.MustCompile(`--[a-z][a-z-]*`)
)

// exitConstants are the Exit* constants of exitcodes.go, by value, read from
// the source so that a code added there and to no table is found.
func exitConstants(t *testing.T) map[int]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "exitcodes.go", nil, 0)
	require.NoError(t, err)
	out := map[int]string{}
	for _, decl := range f.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.CONST {
			continue
		}
		for _, spec := range gen.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if !strings.HasPrefix(name.Name, "Exit") {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				require.True(t, ok && lit.Kind == token.INT, "%s is an integer literal", name.Name)
				v, err := strconv.Atoi(lit.Value)
				require.NoError(t, err)
				require.NotContains(t, out, v, "%s repeats a code", name.Name)
				out[v] = name.Name
			}
		}
	}
	return out
}

// referenceExitCodes are the rows of the reference's exit-code table, by code.
func referenceExitCodes(t *testing.T) map[int]string {
	t.Helper()
	b, err := os.ReadFile(referencePath)
	require.NoError(t, err)
	text := string(b)
	start := strings.Index(text, referenceExitTableHeader)
	require.GreaterOrEqual(t, start, 0, "the mantisctl reference has no exit-code table")
	out := map[int]string{}
	for _, line := range strings.Split(text[start:], "\n")[2:] {
		if !strings.HasPrefix(line, "| ") {
			break
		}
		cells := strings.Split(line, "|")
		require.Len(t, cells, 4, "a row of code and meaning: %q", line)
		code, err := strconv.Atoi(strings.TrimSpace(cells[1]))
		require.NoError(t, err, "row %q", line)
		require.NotContains(t, out, code, "the reference lists %d twice", code)
		out[code] = strings.TrimSpace(cells[2])
	}
	return out
}

// helpExitCodes are the lines of `mantisctl --help`'s "Exit codes:" block, by code.
func helpExitCodes(t *testing.T) map[int]string {
	t.Helper()
	out, err := execute(t, "--help")
	require.NoError(t, err)
	_, block, ok := strings.Cut(out, "Exit codes:\n")
	require.True(t, ok, "--help has no exit codes:\n%s", out)
	codes := map[int]string{}
	for _, line := range strings.Split(block, "\n") {
		m := helpExitLine.FindStringSubmatch(line)
		if m == nil {
			break
		}
		code, _ := strconv.Atoi(m[1])
		codes[code] = m[2]
	}
	return codes
}

// mappedStatuses are the HTTP error statuses httpExitCode maps to each code.
func mappedStatuses() map[int][]string {
	out := map[int][]string{}
	for status := 400; status < 600; status++ {
		code, _ := httpExitCode(&apiclient.Error{Status: status})
		out[code] = append(out[code], strconv.Itoa(status))
	}
	return out
}

func sortedMatches(re *regexp.Regexp, s string) []string {
	out := re.FindAllString(s, -1)
	slices.Sort(out)
	return slices.Compact(out)
}

// The exit-code table of the mantisctl reference (generated from the Exit*
// constants' doc comments), the constants and `mantisctl --help` list the same
// codes; each code's row names the same HTTP statuses and flags in the reference and
// the help, and those statuses are the ones the client maps to it.
func TestExitCodeTableMatchesConstantsAndHelp(t *testing.T) {
	t.Parallel()
	constants, ref, help := exitConstants(t), referenceExitCodes(t), helpExitCodes(t)
	require.NotEmpty(t, constants)
	codes := func(m map[int]string) []int {
		var out []int
		for c := range m {
			out = append(out, c)
		}
		slices.Sort(out)
		return out
	}
	require.Equal(t, codes(constants), codes(ref), "the reference's table and the Exit* constants")
	require.Equal(t, codes(constants), codes(help), "--help and the Exit* constants")

	mapped := mappedStatuses()
	for code, name := range constants {
		inRef, inHelp := sortedMatches(httpStatus, ref[code]), sortedMatches(httpStatus, help[code])
		require.Equal(t, inRef, inHelp, "%d (%s): HTTP statuses of the reference %q and of --help %q", code, name, ref[code], help[code])
		require.Equal(t, sortedMatches(flagName, ref[code]), sortedMatches(flagName, help[code]),
			"%d (%s): flags of the reference %q and of --help %q", code, name, ref[code], help[code])
		for _, status := range inRef {
			require.Contains(t, mapped[code], status, "%d (%s) names HTTP %s, which the client maps elsewhere", code, name, status)
		}
		if code != ExitFailed { // "another error" is every status no other code names
			require.Equal(t, mapped[code], inRef, "%d (%s): the statuses the client maps to it", code, name)
		}
	}
}

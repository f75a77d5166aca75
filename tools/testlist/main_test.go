package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// tree is a small module: a rig, a package whose tests import it, one whose tests
// reach it through a helper, and one that needs nothing.
var tree = map[string]string{
	"go.mod":                              "module example.com/m\n\ngo 1.22\n",
	"internal/testrig/testenv/testenv.go": "package testenv\n\nfunc Server() {}\n",
	"helper/helper.go":                    "package helper\n\nimport \"example.com/m/internal/testrig/testenv\"\n\nfunc Start() { testenv.Server() }\n",
	"fast/fast.go":                        "package fast\n",
	"fast/fast_test.go": `package fast

import "testing"

func FuzzParse(f *testing.F) {}

func Fuzzing() {}

func TestParse(t *testing.T) {}
`,
	"fast/ignored_test.go": `//go:build never

package fast

import "testing"

func FuzzIgnored(f *testing.F) {}
`,
	"slow/slow.go": "package slow\n",
	"slow/slow_test.go": `package slow_test

import (
	"testing"

	"example.com/m/internal/testrig/testenv"
)

// TestOnServer runs on the production server.
//
//mantis:temporal-server
func TestOnServer(t *testing.T) { testenv.Server() }

//mantis:temporal-server
func TestOnServerToo(t *testing.T) {}

func TestOnServerNot(t *testing.T) {}

//mantis:other
func TestElsewhere(t *testing.T) {}

func FuzzSlow(f *testing.F) {}
`,
	"indirect/indirect.go": "package indirect\n",
	"indirect/indirect_test.go": `package indirect

import (
	"testing"

	"example.com/m/helper"
)

func TestThroughHelper(t *testing.T) { helper.Start() }
`,
	"notests/notests.go": "package notests\n",
}

func writeTree(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range tree {
		path := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(body), 0o644))
	}
	return dir
}

func TestFastListsOnlyPackagesWhoseTestsLinkNoRig(t *testing.T) {
	out, err := run(writeTree(t), true, false, "", false)
	require.NoError(t, err)
	require.Equal(t, "./fast", out)
}

func TestFuzzListsEveryFuzzTargetGoTestRuns(t *testing.T) {
	out, err := run(writeTree(t), false, true, "", false)
	require.NoError(t, err)
	require.Equal(t, "fast:FuzzParse slow:FuzzSlow", out)
}

func TestMarkedMatchesExactlyTheMarkedTests(t *testing.T) {
	dir := writeTree(t)
	out, err := run(dir, false, false, "temporal-server", false)
	require.NoError(t, err)
	require.Equal(t, "^(TestOnServer|TestOnServerToo)$", out)
	out, err = run(dir, false, false, "temporal-server", true)
	require.NoError(t, err)
	require.Equal(t, "./slow", out)
	_, err = run(dir, false, false, "nothing", false)
	require.ErrorContains(t, err, "no test carries //mantis:nothing")
}

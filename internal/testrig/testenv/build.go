package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	buildMu  sync.Mutex
	buildDir string
	built    = map[string]string{}
)

// Binary builds the named command (e.g. "mandible" for ./cmd/mandible) once per test
// binary and returns its path.
func Binary(t testing.TB, name string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if p, ok := built[name]; ok {
		return p
	}
	if buildDir == "" {
		dir, err := os.MkdirTemp("", "mantis-bin-")
		if err != nil {
			t.Fatalf("testenv: %v", err)
		}
		buildDir = dir
	}
	out := filepath.Join(buildDir, name)
	cmd := exec.Command("go", "build", "-o", out, "./cmd/"+name)
	cmd.Dir = RepoRoot(t)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("testenv: building %s: %v\n%s", name, err, b)
	}
	built[name] = out
	return out
}

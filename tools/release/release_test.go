package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestHasSection(t *testing.T) {
	log := "# Changelog\n\n## [Unreleased]\n\n## [1.2.3] - 2026-01-01\n- x\n"
	for version, want := range map[string]bool{"1.2.3": true, "1.2.4": false, "1.2": false, "Unreleased": true} {
		if got := HasSection(log, version); got != want {
			t.Errorf("HasSection(%q) = %v, want %v", version, got, want)
		}
	}
}

// TestRunRefusesAVersionWithoutNotes checks that nothing is built, and dist is not
// touched, for a version the changelog has no section for or that is not x.y.z.
func TestRunRefusesAVersionWithoutNotes(t *testing.T) {
	repo := t.TempDir()
	if err := os.WriteFile(filepath.Join(repo, "CHANGELOG.md"), []byte("## [Unreleased]\n## [0.1.0]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dist := filepath.Join(t.TempDir(), "dist")
	if err := os.Mkdir(dist, 0o755); err != nil {
		t.Fatal(err)
	}
	for version, want := range map[string]string{
		"0.2.0":     `no "## [0.2.0]" section`,
		"v0.1.0":    "is not x.y.z",
		"0.1.0-dev": `no "## [0.1.0-dev]" section`,
		"":          "is not x.y.z",
	} {
		err := run(options{Repo: repo, Version: version, Dist: dist})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("version %q: got %v, want an error with %q", version, err, want)
		}
	}
	if _, err := os.Stat(dist); err != nil {
		t.Errorf("dist was removed: %v", err)
	}
}

// TestPackagedUnitsNameTheInstalledBinary rewrites each unit of deploy/systemd as
// the packages ship it: its ExecStart names /usr/bin/<installed name>.
func TestPackagedUnitsNameTheInstalledBinary(t *testing.T) {
	for _, p := range Programs {
		if p.Unit == "" {
			continue
		}
		unit, err := PackagedUnit("../..", p)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(unit), "\nExecStart=/usr/bin/"+p.Installed+" --config /etc/mantis/"+p.ConfigName) {
			t.Errorf("%s: ExecStart does not run /usr/bin/%s with /etc/mantis/%s", p.Unit, p.Installed, p.ConfigName)
		}
		if strings.Contains(string(unit), "/usr/local/bin/") {
			t.Errorf("%s still names /usr/local/bin", p.Unit)
		}
		if _, err := os.Stat(filepath.Join("../../deploy", p.Config)); err != nil {
			t.Errorf("%s: %v", p.Package, err)
		}
	}
}

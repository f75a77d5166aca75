package fleet_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mantis-deploy/mantis/internal/testrig/fleet"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

// The parts of the rig that need no root, and the page's marks, checked in every
// `make test` so that a page or unit that drifts from what the fleet test reads
// fails without root too.

func TestReadBlocks(t *testing.T) {
	t.Parallel()
	page := filepath.Join(t.TempDir(), "page.md")
	text := "# x\n\n```sh host=web-1\necho one\n```\n\n```sh env\nexport A=1\n```\n\n" +
		"<!-- fleet: run ../other.md host=control -->\n\n```\nplain\n```\n"
	if err := os.WriteFile(page, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	blocks, err := fleet.ReadBlocks(page)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 4 {
		t.Fatalf("%d blocks, want 4: %+v", len(blocks), blocks)
	}
	if b := blocks[0]; b.Lang != "sh" || b.Attrs["host"] != "web-1" || b.Text != "echo one\n" || b.Line != 3 {
		t.Errorf("first block: %+v", b)
	}
	if b := blocks[1]; !b.Has("env") || b.Attrs["host"] != "" {
		t.Errorf("env block: %+v", b)
	}
	if b := blocks[2]; b.Include != filepath.Join(filepath.Dir(filepath.Dir(page)), "other.md") || b.Attrs["host"] != "control" {
		t.Errorf("directive: %+v", b)
	}
	if b := blocks[3]; b.Lang != "" || len(b.Attrs) != 0 {
		t.Errorf("unmarked block: %+v", b)
	}
	if err := os.WriteFile(page, []byte("```sh\nopen\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := fleet.ReadBlocks(page); err == nil {
		t.Error("a block never closed reads without error")
	}
}

// TestShippedUnitsParse: the units the page installs are what StartUnit can start.
func TestShippedUnitsParse(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"mandible", "thorax", "agent"} {
		b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(t), "deploy", "systemd", "mantis-"+name+".service"))
		if err != nil {
			t.Fatal(err)
		}
		u, err := fleet.ParseUnit(string(b))
		if err != nil {
			t.Fatalf("mantis-%s: %v", name, err)
		}
		want := []string{"/usr/local/bin/" + name, "--config", "/etc/mantis/" + name + ".toml"}
		if !slices.Equal(u.ExecStart, want) || u.Type != "notify" {
			t.Errorf("mantis-%s: ExecStart %q, Type %s; want %q, notify", name, u.ExecStart, u.Type, want)
		}
		if name != "agent" && (!u.DynamicUser || u.Group != "mantis") {
			t.Errorf("mantis-%s: DynamicUser %v, Group %q; the page's mantis group assumes a dynamic user in mantis", name, u.DynamicUser, u.Group)
		}
	}
}

// TestGuideMarks: every marked block of the page names a host the fleet test has,
// the page declares its variables, and the page it runs has blocks to run.
func TestGuideMarks(t *testing.T) {
	t.Parallel()
	blocks, err := fleet.ReadBlocks(filepath.Join(testenv.RepoRoot(t), guidePage))
	if err != nil {
		t.Fatal(err)
	}
	hosts := append([]string{control, "all", "all-targets"}, targets...)
	var marked, envBlocks, included int
	for _, b := range blocks {
		if b.Has("env") {
			envBlocks++
		}
		if b.Include != "" {
			inc, err := fleet.ReadBlocks(b.Include)
			if err != nil {
				t.Fatalf("%s: %v", b.Where(), err)
			}
			for _, ib := range inc {
				if ib.Attrs["host"] != "" {
					included++
				}
			}
		}
		if h, ok := b.Attrs["host"]; ok && b.Include == "" {
			marked++
			if !slices.Contains(hosts, h) || b.Lang != "sh" {
				t.Errorf("%s: host=%s in a %q block; hosts are %s", b.Where(), h, b.Lang, strings.Join(hosts, ", "))
			}
		}
	}
	if marked < 10 || envBlocks != 1 || included < 2 {
		t.Errorf("%d marked blocks, %d env blocks, %d included blocks: the page lost its marks", marked, envBlocks, included)
	}
}

package fleet_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/testrig/fleet"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

// The page this test runs, from the repository's root, and its hosts.
const (
	guidePage = "docs/getting-started/first-fleet.md"
	control   = "control"
)

var targets = []string{"web-1", "web-2", "web-3"}

// TestFirstFleetGuide runs docs/getting-started/first-fleet.md on a control host and
// three targets made of network namespaces: each block marked host=... on its
// hosts, in order, in one shell per host; the certificate recipe's blocks where the
// page's directive says; the servers the page expects from the project's dev stack
// in the control namespace. It ends when the page's deployment has succeeded on the
// three targets, and asserts that from Mandible's API.
func TestFirstFleetGuide(t *testing.T) {
	fleet.RequireEnabled(t)
	repo := testenv.RepoRoot(t)
	var bins []string
	for _, b := range []string{"mandible", "thorax", "agent", "mantisctl"} {
		bins = append(bins, filepath.Join(repo, "bin", b))
	}
	rig := fleet.New(t, fleet.Options{
		Hosts:   append([]string{control}, targets...),
		Etc:     []string{"mantis"},
		Private: []string{"/usr/local/bin", "/var/lib/mantis", "/etc/systemd/system"},
		Tools:   []string{"openssl", "systemd-analyze", "bash", "make", "go", "groupadd", "getent"},
		Files:   bins,
	})
	forgetGroup(t, "mantis")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	stack := startStack(t, rig.Host(control), repo, filepath.Join(rig.Dir(), "stack"))
	vars := guideVariables(rig, stack)
	checkDeclared(t, filepath.Join(repo, guidePage), vars)

	run := newRunner(t, rig, repo, vars)
	t.Cleanup(func() {
		if t.Failed() {
			run.dumpLogs()
		}
	})
	run.page(ctx, filepath.Join(repo, guidePage), "")
	if !slices.Contains(run.ran, control) || len(run.started) != 2+len(targets) {
		t.Fatalf("the page ran blocks on %v and started %v: want every host and five units", run.ran, run.started)
	}
	assertDeployment(t, ctx, run)
	assertJournals(t, rig)
}

// assertJournals checks that each agent kept its run journal in its own host's
// /var/lib/mantis, the directory its unit's StateDirectory= names.
func assertJournals(t *testing.T, rig *fleet.Rig) {
	t.Helper()
	for _, name := range targets {
		dir := rig.Host(name).Path("/var/lib/mantis/agent/" + name + "/journal")
		entries, err := os.ReadDir(dir)
		if err != nil || len(entries) == 0 {
			t.Errorf("%s: no run journal entries in /var/lib/mantis/agent/%s/journal (%v)", name, name, err)
		}
	}
}

// forgetGroup removes the group at the test's end when it does not exist now: the
// page creates it on the machine's /etc/group, which the hosts share.
func forgetGroup(t *testing.T, name string) {
	t.Helper()
	if _, err := user.LookupGroup(name); err == nil {
		return
	}
	t.Cleanup(func() {
		if _, err := user.LookupGroup(name); err != nil {
			return
		}
		if out, err := exec.Command("groupdel", name).CombinedOutput(); err != nil {
			t.Errorf("groupdel %s: %v: %s", name, err, out)
		}
	})
}

// guideVariables are the values of the page's first block: the control host's
// address and what the dev stack in its namespace serves.
func guideVariables(rig *fleet.Rig, stack map[string]string) map[string]string {
	return map[string]string{
		"MANTIS_CONTROL_ADDR":             rig.Host(control).Addr().String(),
		"MANTIS_DB_URL":                   stack["DATABASE_URL"],
		"MANTIS_TEMPORAL_ADDR":            stack["TEMPORAL_ADDRESS"],
		"MANTIS_TEMPORAL_NAMESPACE":       stack["TEMPORAL_NAMESPACE"],
		"MANTIS_BROKER_HOST":              stack["MANTIS_AMQP_HOST"],
		"MANTIS_BROKER_PORT":              stack["MANTIS_AMQP_PORT"],
		"MANTIS_BROKER_VHOST":             stack["MANTIS_AMQP_VHOST"],
		"MANTIS_BROKER_CA":                stack["MANTIS_CA_CERT"],
		"MANTIS_BROKER_CLIENT_CERT":       stack["MANTIS_CLIENT_CERT"],
		"MANTIS_BROKER_CLIENT_KEY":        stack["MANTIS_CLIENT_KEY"],
		"MANTIS_BROKER_MANDIBLE_USER":     stack["MANTIS_AMQP_MANDIBLE_USER"],
		"MANTIS_BROKER_MANDIBLE_PASSWORD": stack["MANTIS_AMQP_MANDIBLE_PASSWORD"],
		"MANTIS_BROKER_THORAX_USER":       stack["MANTIS_AMQP_THORAX_USER"],
		"MANTIS_BROKER_THORAX_PASSWORD":   stack["MANTIS_AMQP_THORAX_PASSWORD"],
	}
}

var exportLine = regexp.MustCompile(`(?m)^export ([A-Z_][A-Z0-9_]*)=`)

// checkDeclared fails unless the page's `sh env` block declares exactly the
// variables the test gives values, each non-empty.
func checkDeclared(t *testing.T, page string, vars map[string]string) {
	t.Helper()
	blocks, err := fleet.ReadBlocks(page)
	if err != nil {
		t.Fatal(err)
	}
	var declared []string
	for _, b := range blocks {
		if b.Lang == "sh" && b.Has("env") {
			for _, m := range exportLine.FindAllStringSubmatch(b.Text, -1) {
				declared = append(declared, m[1])
			}
		}
	}
	var given []string
	for k, v := range vars {
		if v == "" {
			t.Fatalf("no value for %s from the dev stack", k)
		}
		given = append(given, k)
	}
	slices.Sort(declared)
	slices.Sort(given)
	if !slices.Equal(declared, given) {
		t.Fatalf("the page's variables %v, the test's %v: keep them the same", declared, given)
	}
}

// assertDeployment checks, through Mandible's API, that the page's deployment
// succeeded with every step on each target, on the target's own host.
func assertDeployment(t *testing.T, ctx context.Context, run *runner) {
	t.Helper()
	var list []api.Deployment
	run.ctl(ctx, &list, "list")
	i := slices.IndexFunc(list, func(d api.Deployment) bool { return d.Name == "first-deployment" })
	if i < 0 {
		t.Fatalf("no deployment first-deployment among %d", len(list))
	}
	var d api.Deployment
	run.ctl(ctx, &d, "get", list[i].ID.String())
	if d.Status != "succeeded" || len(d.Steps) != 2 {
		t.Fatalf("deployment %s: %s with %d steps, want succeeded with 2", d.ID, d.Status, len(d.Steps))
	}
	for _, step := range d.Steps {
		var got []string
		for _, r := range step.Targets {
			if r.Status != "succeeded" || r.ExitCode == nil || *r.ExitCode != 0 {
				t.Errorf("step %s on %s: %s (exit %v, %s)", step.Name, r.Target, r.Status, r.ExitCode, r.Error)
			}
			if step.Name == "hello" && !strings.Contains(r.OutputTail, "hello from "+r.Target+", target "+r.Target) {
				t.Errorf("step hello on %s printed %q: not from its own host", r.Target, r.OutputTail)
			}
			got = append(got, r.Target)
		}
		slices.Sort(got)
		if !slices.Equal(got, targets) {
			t.Errorf("step %s ran on %v, want %v", step.Name, got, targets)
		}
	}
	t.Logf("deployment %s succeeded on %v", d.ID, targets)
}

// ctl runs mantisctl on the control host as the page's operator and decodes its
// JSON output into v.
func (r *runner) ctl(ctx context.Context, v any, args ...string) {
	r.t.Helper()
	cmd := r.rig.Host(control).Command(ctx, "mantisctl", append(args, "-o", "json")...)
	cmd.Env = r.env(r.rig.Host(control))
	out, err := cmd.Output()
	if err != nil {
		r.t.Fatalf("mantisctl %v: %v: %s", args, err, out)
	}
	if err := json.Unmarshal(out, v); err != nil {
		r.t.Fatalf("mantisctl %v: %v: %s", args, err, out)
	}
}

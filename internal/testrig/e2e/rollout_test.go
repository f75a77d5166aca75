package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// rolloutFleet is a Mandible, one Thorax and a fleet of real agents, half in poll
// mode and half in listen mode, whose commands write what they ran to a ledger file
// per target in dir.
type rolloutFleet struct {
	*execCluster
	r *replica
	// targets are the fleet's target names in name order: the order a deployment
	// runs them in.
	targets []string
	dir     string
}

// setupRolloutFleet starts n agents (n/2 listen, the rest poll) behind one Thorax.
func setupRolloutFleet(t *testing.T, n int) *rolloutFleet {
	t.Helper()
	c := setupExecCluster(t, 10*time.Second)
	th := c.startThorax(t)
	instance := c.waitRegistered(t, th)
	f := &rolloutFleet{execCluster: c, r: c.mandible.replica, dir: t.TempDir()}
	var polls []*mantisProcess
	for i := range n {
		if i%2 == 0 {
			a := c.startListenAgent(t)
			c.registerListenTarget(t, a)
			f.targets = append(f.targets, a.Name)
			continue
		}
		a := c.startPollAgent(t, th)
		polls = append(polls, a)
		f.targets = append(f.targets, a.Name)
	}
	for _, a := range polls {
		c.waitPollTarget(t, a, instance)
	}
	sort.Strings(f.targets)
	return f
}

// ledger is what target's commands wrote to its ledger, a line each.
func (f *rolloutFleet) ledger(t *testing.T, target string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.dir, target))
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	return strings.Fields(string(b))
}

// mark creates the file name in the fleet's directory, which commands test for.
func (f *rolloutFleet) mark(t *testing.T, name string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(f.dir, name), nil, 0o600))
}

// specJSON is a deployment spec on every target of the fleet, from a template whose
// %[1]s is the target list and %[2]s the ledger directory.
func (f *rolloutFleet) specJSON(t *testing.T, template string) string {
	t.Helper()
	names, err := json.Marshal(f.targets)
	require.NoError(t, err)
	return fmt.Sprintf(template, names, f.dir)
}

// plannedBatches returns the batches the plan gives a step, by step name.
func plannedBatches(t *testing.T, plan map[string]any, step string) [][]string {
	t.Helper()
	for _, ps := range plan["steps"].([]any) {
		s := ps.(map[string]any)
		if s["name"] != step {
			continue
		}
		var out [][]string
		for _, b := range s["batches"].([]any) {
			var batch []string
			for _, name := range b.([]any) {
				batch = append(batch, name.(string))
			}
			out = append(out, batch)
		}
		return out
	}
	require.FailNow(t, "the plan has no step "+step)
	return nil
}

// requestWindows returns, for each target a step ran on, when its request was
// enqueued and when its command ended.
func (f *rolloutFleet) requestWindows(t *testing.T, deployment string, position int) map[string][2]time.Time {
	t.Helper()
	rows, err := f.pool.Query(f.ctx, `
		SELECT t.name, p.created_at, coalesce(c.finished_at, now())
		FROM pending_dispatch_requests p JOIN targets t ON t.id = p.target_id
		LEFT JOIN command_queue c ON c.dispatch_request_id = p.id AND c.dispatch_attempt = p.attempts
		WHERE p.deployment_id = $1 AND p.step_position = $2 AND NOT p.superseded`, uuid.MustParse(deployment), position)
	require.NoError(t, err)
	defer rows.Close()
	out := map[string][2]time.Time{}
	for rows.Next() {
		var name string
		var enqueued, ended time.Time
		require.NoError(t, rows.Scan(&name, &enqueued, &ended))
		out[name] = [2]time.Time{enqueued, ended}
	}
	require.NoError(t, rows.Err())
	return out
}

// A rolling deployment over 20 real agents, with a fleet-wide budget of two failures:
// one target fails the first step (within the budget), two fail the second step in its
// third batch, so the budget is spent there. No later batch starts, the deployment
// fails naming the budget, each batch started only after the one before ended, and the
// plan's batches are what ran.
func TestRolloutStopsWhenTheFleetWideBudgetIsSpentInALaterBatch(t *testing.T) {
	t.Parallel()
	f := setupRolloutFleet(t, 20)
	spec := f.specJSON(t, `{"name":"rolling","targets":%[1]s,
		"rollout":{"batches":[2,5],"max_failures":2},
		"steps":[
		  {"name":"prepare","command":"echo prepare >> %[2]s/$MANTIS_TARGET; test ! -e %[2]s/fail-prepare-$MANTIS_TARGET"},
		  {"name":"install","command":"echo install >> %[2]s/$MANTIS_TARGET; test ! -e %[2]s/fail-install-$MANTIS_TARGET"}]}`)
	code, plan := api(t, f.r, http.MethodPost, "/api/v1/deployments?dry_run=true", spec)
	require.Equal(t, http.StatusOK, code, plan)
	batches := plannedBatches(t, plan, "install")
	require.Equal(t, []int{2, 5, 5, 5, 3}, batchSizes(batches))

	f.mark(t, "fail-prepare-"+f.targets[15])
	f.mark(t, "fail-install-"+batches[2][0])
	f.mark(t, "fail-install-"+batches[2][3])
	code, created := api(t, f.r, http.MethodPost, "/api/v1/deployments", spec)
	require.Equal(t, http.StatusAccepted, code, created)
	id := created["id"].(string)
	d := waitDeployment(t, f.r, id, "failed")
	require.Contains(t, d["error"], "failure budget exceeded: 3 target failures across the deployment", d)
	require.Contains(t, d["error"], "max_failures 2", d)

	ran := slices.Concat(batches[0], batches[1], batches[2])
	for _, target := range f.targets {
		want := []string{"prepare"}
		if slices.Contains(ran, target) {
			want = append(want, "install")
		}
		require.Equal(t, want, f.ledger(t, target), "target %s", target)
	}
	windows := f.requestWindows(t, id, 1)
	require.Len(t, windows, len(ran), "install started on the first three batches only")
	for b := 1; b < 3; b++ {
		var prevEnd time.Time
		for _, target := range batches[b-1] {
			if end := windows[target][1]; end.After(prevEnd) {
				prevEnd = end
			}
		}
		for _, target := range batches[b] {
			require.False(t, windows[target][0].Before(prevEnd), "batch %d started on %s before batch %d ended", b+1, target, b)
		}
	}
}

// batchSizes counts the targets of each batch.
func batchSizes(batches [][]string) []int {
	out := make([]int, len(batches))
	for i, b := range batches {
		out[i] = len(b)
	}
	return out
}

// A canary batch of two over 20 real agents whose health check (twice over two
// seconds) fails on one canary host: the rest of the fleet is never touched, the
// rollback steps run on the two canary hosts only, and the deployment fails naming
// the health gate and the rollback.
func TestCanaryThatFailsItsHealthGateRollsBackOnTheCanaryOnly(t *testing.T) {
	t.Parallel()
	f := setupRolloutFleet(t, 20)
	spec := f.specJSON(t, `{"name":"canaried","targets":%[1]s,
		"rollout":{"batches":[2,"50%%"],"canary":{"verify":"test -e %[2]s/healthy-$MANTIS_TARGET","healthy_checks":2,"healthy_window":"2s"}},
		"steps":[{"name":"install","command":"echo install >> %[2]s/$MANTIS_TARGET"},
		         {"name":"restart","command":"echo restart >> %[2]s/$MANTIS_TARGET"}],
		"on_failure":[{"name":"restore","command":"echo restore >> %[2]s/$MANTIS_TARGET"}]}`)
	canary := f.targets[:2]
	f.mark(t, "healthy-"+canary[0]) // the other canary host is unhealthy
	code, created := api(t, f.r, http.MethodPost, "/api/v1/deployments", spec)
	require.Equal(t, http.StatusAccepted, code, created)
	id := created["id"].(string)
	d := waitDeployment(t, f.r, id, "failed")
	reason := d["error"].(string)
	require.Contains(t, reason, "canary health gate of step install failed: its verify failed on 1 of 2 hosts (2 checks)")
	require.Contains(t, reason, canary[1])
	require.Contains(t, reason, "rolled back on the 2 targets it touched")

	for _, target := range f.targets {
		if slices.Contains(canary, target) {
			require.Equal(t, []string{"install", "restore"}, f.ledger(t, target), "canary host %s", target)
			continue
		}
		require.Empty(t, f.ledger(t, target), "host %s outside the canary was touched", target)
	}
	steps := map[string]string{}
	for _, st := range d["steps"].([]any) {
		s := st.(map[string]any)
		steps[s["name"].(string)] = s["status"].(string)
	}
	require.Equal(t, map[string]string{"install": "failed", "restart": "skipped", "rollback: restore": "succeeded",
		"verify: install": "failed", "verify: restart": "skipped"}, steps, "a deployment's rollout gates each step")
}

// A canary that passes its health gate lets the rest of the fleet run, batch by batch,
// and no rollback runs.
func TestCanaryThatPassesItsHealthGateRollsOnToTheFleet(t *testing.T) {
	t.Parallel()
	f := setupRolloutFleet(t, 20)
	spec := f.specJSON(t, `{"name":"canaried","targets":%[1]s,
		"rollout":{"batches":[1,"25%%"],"canary":{"verify":"grep -q install %[2]s/$MANTIS_TARGET"}},
		"steps":[{"name":"install","command":"echo install >> %[2]s/$MANTIS_TARGET"}],
		"on_failure":[{"name":"restore","command":"echo restore >> %[2]s/$MANTIS_TARGET"}]}`)
	code, created := api(t, f.r, http.MethodPost, "/api/v1/deployments", spec)
	require.Equal(t, http.StatusAccepted, code, created)
	d := waitDeployment(t, f.r, created["id"].(string), "succeeded")
	for _, target := range f.targets {
		require.Equal(t, []string{"install"}, f.ledger(t, target), "target %s", target)
	}
	steps := map[string]string{}
	for _, st := range d["steps"].([]any) {
		s := st.(map[string]any)
		steps[s["name"].(string)] = s["status"].(string)
	}
	require.Equal(t, map[string]string{"install": "succeeded", "verify: install": "succeeded", "rollback: restore": "skipped"}, steps)
}

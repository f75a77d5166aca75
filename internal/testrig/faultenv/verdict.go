package faultenv

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
)

// StuckWindow is how long after a fault ends everything must have settled.
const StuckWindow = 5 * time.Minute

// Outcome is how one deployment ended, with what the scenario rules look at.
type Outcome struct {
	ID     string
	Status string
	Error  string
	// Instances are the Thorax instances that held or were assigned its commands.
	Instances []uuid.UUID
	// Targets are the names of its targets.
	Targets []string
	// Failures are its failed or lost commands.
	Failures []CommandFailure
}

// CommandFailure is a command that failed or was lost, on its target, with its error.
type CommandFailure struct {
	Target, Error string
}

// Rule returns "" when an outcome is what the scenario expects, otherwise why not.
type Rule func(Outcome) string

// AllSucceed is the rule of a fault Mantis must ride out: every deployment succeeds.
func AllSucceed(o Outcome) string {
	if o.Status != "succeeded" {
		return fmt.Sprintf("deployment %s %s (%s), expected succeeded", o.ID, o.Status, o.Error)
	}
	return ""
}

// FailedOnlyWith is the seed's rule for a Thorax that stops heartbeating: its
// in-flight deployments are failed, saying so, and no others.
func FailedOnlyWith(instance uuid.UUID) Rule {
	return func(o Outcome) string {
		held := false
		for _, id := range o.Instances {
			held = held || id == instance
		}
		switch {
		case o.Status == "succeeded":
			return ""
		case o.Status == "failed" && held && strings.Contains(o.Error, "thorax instance"):
			return ""
		case o.Status == "failed" && held:
			return fmt.Sprintf("deployment %s failed on the dead instance without saying so: %q", o.ID, o.Error)
		default:
			return fmt.Sprintf("deployment %s %s (%s) though the dead instance never held it", o.ID, o.Status, o.Error)
		}
	}
}

// FailedOnlyOn is the rule of an agent killed while it ran commands: a deployment on
// target may fail, saying why; every other deployment succeeds.
func FailedOnlyOn(target string) Rule {
	return func(o Outcome) string {
		if o.Status == "succeeded" || (o.Status == "failed" && slices.Contains(o.Targets, target) && o.Error != "") {
			return ""
		}
		return fmt.Sprintf("deployment %s %s (%s) though it does not run on %s", o.ID, o.Status, o.Error, target)
	}
}

// RefusedOn is the rule of an agent that refuses commands it cannot journal: a
// deployment may fail only through commands on target refused with an error that
// contains reason; every other deployment succeeds.
func RefusedOn(target, reason string) Rule {
	return func(o Outcome) string {
		if o.Status == "succeeded" {
			return ""
		}
		refused := false
		for _, f := range o.Failures {
			if f.Target != target || !strings.Contains(f.Error, reason) {
				return fmt.Sprintf("deployment %s %s: a command on %s failed with %q, not refused on %s for %q",
					o.ID, o.Status, f.Target, f.Error, target, reason)
			}
			refused = true
		}
		if o.Status != "failed" || !refused {
			return fmt.Sprintf("deployment %s %s (%s) with no command refused on %s", o.ID, o.Status, o.Error, target)
		}
		return ""
	}
}

// Result is one row of the fault table.
type Result struct {
	Scenario    string
	Fault       string
	Deployments int
	ExpectedMet bool
	Lost        int
	RunTwice    int
	Stuck       int
	// Recover runs from the fault's end to the first deployment submitted after it
	// that succeeded; negative when none did.
	Recover time.Duration
	// Problems says what each count above stands for.
	Problems []string
}

// Clean reports whether the row is "yes / 0 / 0 / 0".
func (r Result) Clean() bool {
	return r.ExpectedMet && r.Lost == 0 && r.RunTwice == 0 && r.Stuck == 0 && len(r.Problems) == 0
}

func (r *Result) problem(format string, args ...any) {
	if len(r.Problems) < 50 {
		r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
	}
}

// Verify stops the workload, waits up to StuckWindow after faultEnd for everything to
// settle, and then checks the ledger, the database and the event stream.
func (c *Cluster) Verify(scenario, fault string, w *Workload, faultEnd time.Time, rule Rule) Result {
	c.t.Helper()
	w.Stop()
	res := Result{Scenario: scenario, Fault: fault, ExpectedMet: true, Recover: -1}
	accepted := w.Accepted()
	res.Deployments = len(accepted)
	for _, key := range w.Refused() {
		res.problem("submission %s never accepted", key)
	}
	res.Stuck = c.waitSettled(faultEnd.Add(StuckWindow), &res)

	ids := make([]string, len(accepted))
	for i, s := range accepted {
		ids[i] = s.ID
	}
	outcomes, err := c.outcomes(ids)
	if err != nil {
		c.t.Fatalf("faultenv: reading outcomes: %v", err)
	}
	for _, id := range ids {
		o, ok := outcomes[id]
		if !ok {
			res.Lost++
			res.problem("accepted deployment %s is not in the database", id)
			continue
		}
		if o.Status == "pending" || o.Status == "running" {
			continue // counted as stuck
		}
		if why := rule(o); why != "" {
			res.ExpectedMet = false
			res.problem("%s", why)
		}
	}
	entries, err := c.ReadLedger()
	if err != nil {
		c.t.Fatalf("faultenv: %v", err)
	}
	var twice []string
	res.RunTwice, twice = runTwice(entries)
	for _, p := range twice {
		res.problem("run twice: %s", p)
	}
	c.countLost(ids, entries, &res)
	c.checkEvents(&res)
	res.Recover = c.recovery(faultEnd)
	return res
}

// waitSettled waits until no deployment, request or command is non-terminal, or the
// deadline, and returns how many still are.
func (c *Cluster) waitSettled(deadline time.Time, res *Result) int {
	for {
		var deps, reqs, cmds int
		err := c.Pool.QueryRow(c.Ctx, `SELECT
			(SELECT count(*) FROM deployments WHERE status IN ('pending', 'running')),
			(SELECT count(*) FROM pending_dispatch_requests WHERE status IN ('pending', 'processing')),
			(SELECT count(*) FROM command_queue WHERE status IN ('queued', 'running'))`).Scan(&deps, &reqs, &cmds)
		if err == nil && deps+reqs+cmds == 0 {
			return 0
		}
		if time.Now().After(deadline) {
			if err != nil {
				res.problem("counting unsettled rows: %v", err)
				return -1
			}
			res.problem("stuck %s after the fault: %d deployments, %d requests, %d commands non-terminal",
				StuckWindow, deps, reqs, cmds)
			return deps + reqs + cmds
		}
		<-time.After(2 * time.Second)
	}
}

// outcomes reads each deployment's status, error and the instances of its commands.
func (c *Cluster) outcomes(ids []string) (map[string]Outcome, error) {
	rows, err := c.Pool.Query(c.Ctx, `
		SELECT d.id::text, d.status, coalesce(d.error, ''),
		       coalesce(array_agg(DISTINCT i) FILTER (WHERE i IS NOT NULL), '{}'),
		       (SELECT coalesce(array_agg(t.name), '{}') FROM deployment_targets dt
		        JOIN targets t ON t.id = dt.target_id WHERE dt.deployment_id = d.id)
		FROM deployments d
		LEFT JOIN command_queue q ON q.deployment_id = d.id
		LEFT JOIN LATERAL unnest(ARRAY[q.holder_instance_id, q.assigned_instance_id]) AS i ON true
		WHERE d.id::text = ANY($1)
		GROUP BY d.id`, ids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]Outcome{}
	for rows.Next() {
		var o Outcome
		if err := rows.Scan(&o.ID, &o.Status, &o.Error, &o.Instances, &o.Targets); err != nil {
			return nil, err
		}
		out[o.ID] = o
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, c.addFailures(ids, out)
}

// addFailures adds to each outcome its failed and lost commands.
func (c *Cluster) addFailures(ids []string, out map[string]Outcome) error {
	rows, err := c.Pool.Query(c.Ctx, `
		SELECT q.deployment_id::text, t.name, coalesce(q.error, '') FROM command_queue q
		JOIN targets t ON t.id = q.target_id
		WHERE q.deployment_id::text = ANY($1) AND q.status IN ('failed', 'lost')`, ids)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var f CommandFailure
		if err := rows.Scan(&id, &f.Target, &f.Error); err != nil {
			return err
		}
		o := out[id]
		o.Failures = append(o.Failures, f)
		out[id] = o
	}
	return rows.Err()
}

// recovery is the time from faultEnd to the end of the first deployment created after
// it that succeeded, or -1.
func (c *Cluster) recovery(faultEnd time.Time) time.Duration {
	var first *time.Time
	err := c.Pool.QueryRow(c.Ctx, `SELECT min(finished_at) FROM deployments WHERE created_at >= $1 AND status = 'succeeded'`,
		faultEnd).Scan(&first)
	if err != nil || first == nil {
		return -1
	}
	return first.Sub(faultEnd)
}

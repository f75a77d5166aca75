package faultenv

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// eventsReadTimeout bounds the reading of the whole event stream.
const eventsReadTimeout = 2 * time.Minute

// countLost counts what has no terminal outcome: a succeeded step's target without an
// ended request, a ledger entry without a stored result or reason, and a succeeded
// command the ledger never saw run.
func (c *Cluster) countLost(ids []string, entries []LedgerEntry, res *Result) {
	rows, err := c.Pool.Query(c.Ctx, `
		SELECT d.id::text, s.name, t.name FROM deployments d
		JOIN deployment_steps s ON s.deployment_id = d.id AND s.status = 'succeeded'
		JOIN deployment_targets dt ON dt.deployment_id = d.id
		JOIN targets t ON t.id = dt.target_id
		WHERE d.id::text = ANY($1) AND NOT EXISTS (
		    SELECT 1 FROM pending_dispatch_requests p
		    WHERE p.deployment_id = d.id AND p.step_position = s.position AND p.target_id = dt.target_id
		      AND (p.status IN ('failed', 'expired') OR (p.status = 'dispatched' AND EXISTS (
		          SELECT 1 FROM command_queue q WHERE q.dispatch_request_id = p.id
		            AND q.status IN ('succeeded', 'failed', 'cancelled', 'lost')))))`, ids)
	if err != nil {
		c.t.Fatalf("faultenv: reading target-steps: %v", err)
	}
	for rows.Next() {
		var dep, step, target string
		if err := rows.Scan(&dep, &step, &target); err != nil {
			c.t.Fatalf("faultenv: %v", err)
		}
		res.Lost++
		res.problem("lost: deployment %s step %s target %s has no ended request", dep, step, target)
	}
	rows.Close()

	ran := map[string]bool{}
	var ledgerIDs []string
	for _, e := range entries {
		if !ran[e.DispatchRequestID] {
			ledgerIDs = append(ledgerIDs, e.DispatchRequestID)
		}
		ran[e.DispatchRequestID] = true
	}
	stored := map[string]bool{}
	rows, err = c.Pool.Query(c.Ctx, `
		SELECT DISTINCT dispatch_request_id::text FROM command_queue
		WHERE dispatch_request_id::text = ANY($1) AND status IN ('succeeded', 'failed', 'cancelled', 'lost')
		  AND (exit_code IS NOT NULL OR coalesce(error, '') <> '')`, ledgerIDs)
	if err != nil {
		c.t.Fatalf("faultenv: reading stored results: %v", err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			c.t.Fatalf("faultenv: %v", err)
		}
		stored[id] = true
	}
	rows.Close()
	for _, id := range ledgerIDs {
		if !stored[id] {
			res.Lost++
			res.problem("lost: request %s ran (ledger) but has no stored result or reason", id)
		}
	}

	rows, err = c.Pool.Query(c.Ctx, `
		SELECT DISTINCT dispatch_request_id::text FROM command_queue
		WHERE deployment_id::text = ANY($1) AND status = 'succeeded'`, ids)
	if err != nil {
		c.t.Fatalf("faultenv: reading succeeded commands: %v", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			c.t.Fatalf("faultenv: %v", err)
		}
		if !ran[id] {
			res.Lost++
			res.problem("lost: request %s succeeded but never ran (no ledger entry)", id)
		}
	}
}

// checkEvents reads /sse/events from the start, resuming with Last-Event-ID whenever
// the stream closes, and checks that it holds every committed event once, in id order.
func (c *Cluster) checkEvents(res *Result) {
	var want []int64
	rows, err := c.Pool.Query(c.Ctx, `SELECT id FROM deployment_events ORDER BY id`)
	if err != nil {
		c.t.Fatalf("faultenv: reading events: %v", err)
	}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			c.t.Fatalf("faultenv: %v", err)
		}
		want = append(want, id)
	}
	rows.Close()
	if len(want) == 0 {
		res.problem("events: none committed")
		return
	}
	got, err := c.readEvents(want[len(want)-1])
	if err != nil {
		res.problem("events: %v", err)
		res.ExpectedMet = false
		return
	}
	if len(got) != len(want) {
		res.ExpectedMet = false
		res.problem("events: the stream held %d events, the log %d", len(got), len(want))
		return
	}
	for i := range want {
		if got[i] != want[i] {
			res.ExpectedMet = false
			res.problem("events: event %d of the stream is id %d, the log's is %d", i, got[i], want[i])
			return
		}
	}
}

// readEvents reads event ids from the start until last.
func (c *Cluster) readEvents(last int64) ([]int64, error) {
	ctx, cancel := context.WithTimeout(c.Ctx, eventsReadTimeout)
	defer cancel()
	var got []int64
	var resume int64
	for ctx.Err() == nil {
		ids, err := c.readEventStream(ctx, resume, last)
		got = append(got, ids...)
		if len(got) > 0 {
			resume = got[len(got)-1]
		}
		if resume >= last {
			return got, nil
		}
		if err != nil && ctx.Err() == nil {
			<-time.After(time.Second)
		}
	}
	return got, fmt.Errorf("the stream stopped at id %d of %d: %w", resume, last, ctx.Err())
}

// readEventStream reads one connection of the stream after resume, until id last.
func (c *Cluster) readEventStream(ctx context.Context, resume, last int64) ([]int64, error) {
	var addr string
	for _, m := range c.Mandibles {
		if m.Running() {
			addr = m.HTTPAddr
			break
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/sse/events", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+APIToken)
	req.Header.Set("Last-Event-ID", strconv.FormatInt(resume, 10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /sse/events: %s", resp.Status)
	}
	var ids []int64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "id: ")
		if !ok {
			continue
		}
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return ids, err
		}
		ids = append(ids, id)
		if id >= last {
			return ids, nil
		}
	}
	return ids, sc.Err()
}

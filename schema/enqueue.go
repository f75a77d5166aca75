package schema

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/internal/safetext"
	"github.com/mantis-deploy/mantis/internal/telemetry/traceparent"
	"github.com/mantis-deploy/mantis/schema/internal/dbsqlc"
)

// NewDispatchRequest is one request to enqueue.
type NewDispatchRequest struct {
	// IdempotencyKey makes the enqueue idempotent: the same key yields the same request.
	IdempotencyKey string
	// Target is the target's name.
	Target       string
	DeploymentID *uuid.UUID
	StepPosition *int
	Command      string
	// Timeout bounds the command's run on the agent; zero means ten minutes.
	Timeout  time.Duration
	Priority string
	// Env is extra environment for the command; WorkingDir its directory (empty: the
	// agent's default).
	Env        map[string]string
	WorkingDir string
}

// EnqueuedRequest is the stored request for one enqueue: Created is false when the key
// already named a request.
type EnqueuedRequest struct {
	ID             uuid.UUID
	IdempotencyKey string
	Created        bool
	ExpiresAt      time.Time
}

const defaultCommandTimeout = 10 * time.Minute

// maxRequestText bounds each free-text field of a dispatch request.
const maxRequestText = 64 << 10

// EnqueueDispatchRequests writes reqs in one statement. An unknown target, a bad
// priority or an empty command is a *domain.InputError and nothing is written. Requests whose
// idempotency key already exists are returned as they are, not written again. The insert
// notifies every replica's LISTEN connection (DispatchRequestsChannel).
func EnqueueDispatchRequests(ctx context.Context, db DB, reqs []NewDispatchRequest) ([]EnqueuedRequest, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	if err := requestProblems(reqs).Err(); err != nil {
		return nil, err
	}
	ids, err := resolveTargets(ctx, db, reqs)
	if err != nil {
		return nil, err
	}
	params, err := insertParams(reqs, ids)
	if err != nil {
		return nil, err
	}
	params.TraceParent = traceparent.Of(ctx) // the requests continue the enqueuer's trace
	inserted, err := queries.InsertDispatchRequests(ctx, db, params)
	if err != nil {
		return nil, fmt.Errorf("inserting dispatch requests: %w", err)
	}
	byKey := make(map[string]EnqueuedRequest, len(reqs))
	for _, r := range inserted {
		byKey[r.IdempotencyKey] = EnqueuedRequest{ID: r.ID, IdempotencyKey: r.IdempotencyKey, Created: true, ExpiresAt: r.ExpiresAt}
	}
	var existing []string
	for _, r := range reqs {
		if _, ok := byKey[r.IdempotencyKey]; !ok {
			existing = append(existing, r.IdempotencyKey)
		}
	}
	if len(existing) > 0 {
		rows, err := queries.DispatchRequestsByKey(ctx, db, existing)
		if err != nil {
			return nil, fmt.Errorf("reading existing dispatch requests: %w", err)
		}
		for _, r := range rows {
			byKey[r.IdempotencyKey] = EnqueuedRequest{ID: r.ID, IdempotencyKey: r.IdempotencyKey, ExpiresAt: r.ExpiresAt}
		}
	}
	result := make([]EnqueuedRequest, len(reqs))
	for i, r := range reqs {
		result[i] = byKey[r.IdempotencyKey]
	}
	return result, nil
}

// requestProblems lists every problem of reqs that needs no database, each naming its
// field.
func requestProblems(reqs []NewDispatchRequest) domain.Problems {
	var problems domain.Problems
	seen := map[string]bool{}
	for i, r := range reqs {
		at := fmt.Sprintf("requests[%d]", i)
		if strings.TrimSpace(r.IdempotencyKey) == "" {
			problems.Add(at+".idempotency_key", "required")
		} else if seen[r.IdempotencyKey] {
			problems.Addf(at+".idempotency_key", "%q repeats an earlier request", r.IdempotencyKey)
		}
		seen[r.IdempotencyKey] = true
		if strings.TrimSpace(r.Command) == "" {
			problems.Add(at+".command", "must not be empty")
		}
		problems = append(problems, unstorableRequestText(at, r)...)
		if !domain.ValidPriority(r.Priority) {
			problems.Addf(at+".priority", "must be high, normal or low, got %q", r.Priority)
		}
		if r.Timeout < 0 {
			problems.Addf(at+".timeout", "must be positive, got %s", r.Timeout)
		}
		if (r.DeploymentID == nil) != (r.StepPosition == nil) {
			problems.Add(at, "deployment_id and step_position go together")
		}
		if r.Target == "" {
			problems.Add(at+".target", "required")
		}
	}
	return problems
}

// resolveTargets returns the id of each request's target, or a *domain.InputError naming
// every request whose target is unknown or deregistered.
func resolveTargets(ctx context.Context, db DB, reqs []NewDispatchRequest) (map[string]uuid.UUID, error) {
	names := make([]string, len(reqs))
	for i, r := range reqs {
		names[i] = r.Target
	}
	rows, err := queries.ResolveTargets(ctx, db, names)
	if err != nil {
		return nil, fmt.Errorf("resolving targets: %w", err)
	}
	ids := make(map[string]uuid.UUID, len(rows))
	for _, r := range rows {
		ids[r.Name] = r.ID
	}
	var problems domain.Problems
	for i, r := range reqs {
		if _, ok := ids[r.Target]; !ok {
			problems.Addf(fmt.Sprintf("requests[%d].target", i), "unknown target %q", r.Target)
		}
	}
	if err := problems.Err(); err != nil {
		return nil, err
	}
	return ids, nil
}

// insertParams lays reqs out as the insert's parallel arrays. The arrays hold no NULL:
// uuid.Nil stands for no deployment and "" for the agent's default directory.
func insertParams(reqs []NewDispatchRequest, targets map[string]uuid.UUID) (dbsqlc.InsertDispatchRequestsParams, error) {
	n := len(reqs)
	p := dbsqlc.InsertDispatchRequestsParams{
		Ttl: domain.DispatchRequestTTL, Keys: make([]string, n), TargetIds: make([]uuid.UUID, n),
		DeploymentIds: make([]uuid.UUID, n), StepPositions: make([]int32, n), Commands: make([]string, n),
		TimeoutsUs: make([]int64, n), Priorities: make([]string, n), Envs: make([]string, n), WorkingDirs: make([]string, n),
	}
	for i, r := range reqs {
		p.Keys[i], p.TargetIds[i], p.Commands[i], p.Priorities[i], p.WorkingDirs[i] = r.IdempotencyKey, targets[r.Target], r.Command, r.Priority, r.WorkingDir
		if r.DeploymentID != nil {
			p.DeploymentIds[i], p.StepPositions[i] = *r.DeploymentID, int32(*r.StepPosition)
		}
		timeout := r.Timeout
		if timeout == 0 {
			timeout = defaultCommandTimeout
		}
		p.TimeoutsUs[i] = timeout.Microseconds()
		env := r.Env
		if env == nil {
			env = map[string]string{}
		}
		b, err := json.Marshal(env)
		if err != nil {
			return p, fmt.Errorf("requests[%d].env: %w", i, err)
		}
		p.Envs[i] = string(b)
	}
	return p, nil
}

// unstorableRequestText names each text field of r that PostgreSQL could not store
// (NUL, not UTF-8) or that passes maxRequestText, so the request is refused by field
// instead of failing the insert.
func unstorableRequestText(at string, r NewDispatchRequest) domain.Problems {
	var problems domain.Problems
	check := func(field, text string) {
		if p := safetext.Unstorable(text, maxRequestText); p != "" {
			problems.Add(at+"."+field, p)
		}
	}
	check("idempotency_key", r.IdempotencyKey)
	check("command", r.Command)
	check("working_dir", r.WorkingDir)
	for _, k := range slices.Sorted(maps.Keys(r.Env)) {
		check("env."+safetext.Bound(safetext.DisplayString(k), 64), k+r.Env[k])
	}
	return problems
}

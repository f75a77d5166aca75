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
	"github.com/jackc/pgx/v5"

	"github.com/mantis-deploy/mantis/internal/safetext"
)

// The budget and lifetime of a dispatch request (seed "Competing Consumers": "Failed
// dispatches are retried up to 10 times").
const (
	// MaxDispatchRetries is how many times a request whose delivery failed is delivered
	// again. A delivery is a first delivery or a retry that Mandible makes: a command_queue
	// row written, or an attempt that found no live Thorax. The broker's one free requeue
	// of a nudge is not a delivery, and a command handed back unrun (a Thorax draining or
	// restarting) costs nothing.
	MaxDispatchRetries = 10
	// MaxDispatchDeliveries is the most deliveries a request gets: the first plus
	// MaxDispatchRetries retries. The failure of the last one fails the request, so
	// attempts (which counts failed deliveries) ends at MaxDispatchDeliveries.
	MaxDispatchDeliveries = 1 + MaxDispatchRetries
	// DispatchRequestTTL is how long after creation a request expires, whatever its state.
	DispatchRequestTTL = 24 * time.Hour
)

// Priorities, in claim order.
const (
	PriorityHigh   = "high"
	PriorityNormal = "normal"
	PriorityLow    = "low"
)

// Priorities lists the priorities in claim order.
var Priorities = []string{PriorityHigh, PriorityNormal, PriorityLow}

// ValidPriority reports whether p is one of the priorities.
func ValidPriority(p string) bool {
	return p == PriorityHigh || p == PriorityNormal || p == PriorityLow
}

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

// InputError lists every problem with a request, each naming its field.
type InputError struct{ Problems []string }

func (e *InputError) Error() string {
	return "invalid request: " + strings.Join(e.Problems, "; ")
}

const defaultCommandTimeout = 10 * time.Minute

// EnqueueDispatchRequests writes reqs in one statement. An unknown target, a bad
// priority or an empty command is an *InputError and nothing is written. Requests whose
// idempotency key already exists are returned as they are, not written again. The insert
// notifies every replica's LISTEN connection.
func EnqueueDispatchRequests(ctx context.Context, db DB, reqs []NewDispatchRequest) ([]EnqueuedRequest, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	var problems []string
	names := make([]string, 0, len(reqs))
	seen := map[string]bool{}
	for i, r := range reqs {
		at := fmt.Sprintf("requests[%d]", i)
		if strings.TrimSpace(r.IdempotencyKey) == "" {
			problems = append(problems, at+".idempotency_key: required")
		} else if seen[r.IdempotencyKey] {
			problems = append(problems, fmt.Sprintf("%s.idempotency_key: %q repeats an earlier request", at, r.IdempotencyKey))
		}
		seen[r.IdempotencyKey] = true
		if strings.TrimSpace(r.Command) == "" {
			problems = append(problems, at+".command: must not be empty")
		}
		problems = append(problems, unstorableRequestText(at, r)...)
		if !ValidPriority(r.Priority) {
			problems = append(problems, fmt.Sprintf("%s.priority: must be high, normal or low, got %q", at, r.Priority))
		}
		if r.Timeout < 0 {
			problems = append(problems, fmt.Sprintf("%s.timeout: must be positive, got %s", at, r.Timeout))
		}
		if (r.DeploymentID == nil) != (r.StepPosition == nil) {
			problems = append(problems, at+": deployment_id and step_position go together")
		}
		if r.Target == "" {
			problems = append(problems, at+".target: required")
		}
		names = append(names, r.Target)
	}
	if len(problems) > 0 {
		return nil, &InputError{Problems: problems}
	}

	ids := map[string]uuid.UUID{}
	rows, err := db.Query(ctx, `SELECT name, id FROM targets WHERE name = ANY($1) AND deregistered_at IS NULL`, names)
	if err != nil {
		return nil, fmt.Errorf("resolving targets: %w", err)
	}
	for rows.Next() {
		var name string
		var id uuid.UUID
		if err := rows.Scan(&name, &id); err != nil {
			return nil, fmt.Errorf("resolving targets: %w", err)
		}
		ids[name] = id
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("resolving targets: %w", err)
	}
	for i, r := range reqs {
		if _, ok := ids[r.Target]; !ok {
			problems = append(problems, fmt.Sprintf("requests[%d].target: unknown target %q", i, r.Target))
		}
	}
	if len(problems) > 0 {
		return nil, &InputError{Problems: problems}
	}

	var (
		keys      = make([]string, len(reqs))
		targets   = make([]uuid.UUID, len(reqs))
		deps      = make([]*uuid.UUID, len(reqs))
		steps     = make([]*int32, len(reqs))
		commands  = make([]string, len(reqs))
		timeouts  = make([]int64, len(reqs))
		prios     = make([]string, len(reqs))
		envs      = make([]string, len(reqs))
		dirs      = make([]*string, len(reqs))
		byKey     = make(map[string]int, len(reqs))
		result    = make([]EnqueuedRequest, len(reqs))
		remaining []string
	)
	for i, r := range reqs {
		keys[i], targets[i], deps[i], commands[i], prios[i] = r.IdempotencyKey, ids[r.Target], r.DeploymentID, r.Command, r.Priority
		if r.StepPosition != nil {
			p := int32(*r.StepPosition)
			steps[i] = &p
		}
		timeout := r.Timeout
		if timeout == 0 {
			timeout = defaultCommandTimeout
		}
		timeouts[i] = timeout.Microseconds()
		env := r.Env
		if env == nil {
			env = map[string]string{}
		}
		b, err := json.Marshal(env)
		if err != nil {
			return nil, fmt.Errorf("requests[%d].env: %w", i, err)
		}
		envs[i] = string(b)
		if r.WorkingDir != "" {
			dirs[i] = &r.WorkingDir
		}
		byKey[r.IdempotencyKey] = i
	}
	rows, err = db.Query(ctx, `
		INSERT INTO pending_dispatch_requests
		    (idempotency_key, target_id, deployment_id, step_position, command, timeout, priority, env, working_dir, expires_at)
		SELECT k, t, d, s, c, make_interval(secs => us / 1e6), p, e::jsonb, w, now() + make_interval(secs => $8)
		FROM unnest($1::text[], $2::uuid[], $3::uuid[], $4::int[], $5::text[], $6::bigint[], $7::text[], $9::text[], $10::text[])
		     AS r(k, t, d, s, c, us, p, e, w)
		ON CONFLICT (idempotency_key) DO NOTHING
		RETURNING idempotency_key, id, expires_at`,
		keys, targets, deps, steps, commands, timeouts, prios, DispatchRequestTTL.Seconds(), envs, dirs)
	if err != nil {
		return nil, fmt.Errorf("inserting dispatch requests: %w", err)
	}
	created := map[string]bool{}
	for rows.Next() {
		var e EnqueuedRequest
		if err := rows.Scan(&e.IdempotencyKey, &e.ID, &e.ExpiresAt); err != nil {
			return nil, fmt.Errorf("inserting dispatch requests: %w", err)
		}
		e.Created = true
		created[e.IdempotencyKey] = true
		result[byKey[e.IdempotencyKey]] = e
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("inserting dispatch requests: %w", err)
	}
	for _, k := range keys {
		if !created[k] {
			remaining = append(remaining, k)
		}
	}
	if len(remaining) > 0 {
		rows, err := db.Query(ctx, `SELECT idempotency_key, id, expires_at FROM pending_dispatch_requests WHERE idempotency_key = ANY($1)`, remaining)
		if err != nil {
			return nil, fmt.Errorf("reading existing dispatch requests: %w", err)
		}
		for rows.Next() {
			var e EnqueuedRequest
			if err := rows.Scan(&e.IdempotencyKey, &e.ID, &e.ExpiresAt); err != nil {
				return nil, fmt.Errorf("reading existing dispatch requests: %w", err)
			}
			result[byKey[e.IdempotencyKey]] = e
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("reading existing dispatch requests: %w", err)
		}
	}
	return result, nil
}

// ClaimedRequest is a request a replica won, with the epoch that fences its outcome.
type ClaimedRequest struct {
	ID        uuid.UUID `json:"id"`
	Epoch     int64     `json:"epoch"`
	Target    string    `json:"target"`
	Priority  string    `json:"priority"`
	Attempts  int       `json:"attempts"`
	CreatedAt time.Time `json:"created_at"`
}

// ClaimResult is one claim: the rows won, and how many candidates were lost to other
// replicas between load and update.
type ClaimResult struct {
	Claimed []ClaimedRequest
	Lost    int
}

// ClaimPending claims up to limit pending requests for replica: priority first, then
// age, skipping rows waiting for their next attempt and rows past expiry. The claim is
// the seed's conditional UPDATE from pending to processing (only an update that still
// sees pending wins) with a new claim epoch; SKIP LOCKED on the load keeps replicas
// from loading the same rows, so losses stay rare.
func ClaimPending(ctx context.Context, db DB, replica string, limit int) (ClaimResult, error) {
	return claimKeyed(ctx, db, replica, "", limit)
}

// Delivery outcomes of one claimed request.
const (
	// OutcomeDispatched: a command_queue row was written.
	OutcomeDispatched = "dispatched"
	// OutcomeRetry: the delivery failed; the request is pending again after a backoff.
	OutcomeRetry = "retry"
	// OutcomeFailed: the delivery failed and the budget is spent: it was the last of
	// MaxDispatchDeliveries (a first delivery and MaxDispatchRetries retries).
	OutcomeFailed = "failed"
	// OutcomeExpired: the request passed its 24 h expiry before delivery.
	OutcomeExpired = "expired"
	// OutcomeStale: the caller's epoch no longer holds the request (it was reclaimed);
	// the write was refused.
	OutcomeStale = "stale"
)

// ClaimRef names a claimed request and the epoch its holder claimed it with.
type ClaimRef struct {
	ID    uuid.UUID `json:"id"`
	Epoch int64     `json:"epoch"`
}

// DeliveryOutcome is what became of one claimed request.
type DeliveryOutcome struct {
	RequestID     uuid.UUID  `json:"request_id"`
	Outcome       string     `json:"outcome"`
	CommandID     *uuid.UUID `json:"command_id,omitempty"`
	Error         string     `json:"error,omitempty"`
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
	// Queued is how long the request waited from creation to dispatch.
	Queued time.Duration `json:"queued_ns,omitempty"`
	// Command is the written command, for the broker nudge.
	Command *DispatchedCommand `json:"command,omitempty"`
}

// DispatchedCommand is the part of a written command_queue row a nudge carries.
type DispatchedCommand struct {
	ID                 uuid.UUID  `json:"id"`
	Target             string     `json:"target"`
	Mode               string     `json:"mode"`
	Priority           string     `json:"priority"`
	AssignedInstanceID *uuid.UUID `json:"assigned_instance_id,omitempty"`
	MaxRetries         int        `json:"max_retries"`
}

// DeliverOptions tunes DeliverClaimed.
type DeliverOptions struct {
	// HeartbeatTimeout is how recent a Thorax heartbeat must be for the instance to count
	// as live.
	HeartbeatTimeout time.Duration
}

// DeliverClaimed records the delivery of a claimed batch in one transaction: for each
// request still held by replica at its epoch, a command_queue row for its target (when a
// live Thorax serves the target), or a failed attempt with backoff (or failure once the
// budget is spent), or expiry. Writes are fenced by epoch: a request reclaimed since is
// reported stale and left alone. Replaying a batch returns the outcomes recorded the
// first time.
func DeliverClaimed(ctx context.Context, db TxBeginner, replica string, batch []ClaimRef, opts DeliverOptions) ([]DeliveryOutcome, error) {
	if len(batch) == 0 {
		return nil, nil
	}
	ids := make([]uuid.UUID, len(batch))
	epochs := make([]int64, len(batch))
	for i, c := range batch {
		ids[i], epochs[i] = c.ID, c.Epoch
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("delivering batch: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()

	rows, err := tx.Query(ctx, `
		SELECT p.id, p.status, p.claim_epoch = b.epoch AND p.claimed_by IS NOT DISTINCT FROM $3,
		       p.attempts, p.expires_at <= now(), now() - p.created_at, p.last_error, p.next_attempt_at,
		       p.priority, t.name, t.mode, t.assigned_instance_id,
		       EXISTS (SELECT 1 FROM thorax_instances i
		               WHERE i.id = t.assigned_instance_id AND i.status = 'live'
		                 AND i.last_heartbeat_at > now() - make_interval(secs => $4)),
		       t.deregistered_at IS NOT NULL,
		       (SELECT c.id FROM command_queue c WHERE c.dispatch_request_id = p.id AND c.dispatch_attempt = p.attempts)
		FROM unnest($1::uuid[], $2::bigint[]) AS b(id, epoch)
		JOIN pending_dispatch_requests p ON p.id = b.id
		JOIN targets t ON t.id = p.target_id
		FOR UPDATE OF p`, ids, epochs, replica, opts.HeartbeatTimeout.Seconds())
	if err != nil {
		return nil, fmt.Errorf("loading claimed batch: %w", err)
	}
	type row struct {
		id                 uuid.UUID
		status             string
		held               bool
		attempts           int
		expired            bool
		queued             time.Duration
		lastError          *string
		nextAttempt        time.Time
		priority           string
		target, mode       string
		instance           *uuid.UUID
		live, deregistered bool
		existingCommandID  *uuid.UUID
	}
	loaded := map[uuid.UUID]row{}
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.id, &r.status, &r.held, &r.attempts, &r.expired, &r.queued, &r.lastError, &r.nextAttempt,
			&r.priority, &r.target, &r.mode, &r.instance, &r.live, &r.deregistered, &r.existingCommandID); err != nil {
			rows.Close()
			return nil, fmt.Errorf("loading claimed batch: %w", err)
		}
		loaded[r.id] = r
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("loading claimed batch: %w", err)
	}

	var (
		outcomes = make([]DeliveryOutcome, 0, len(batch))
		// command rows to write
		cmdIDs, cmdReqs []uuid.UUID
		cmdRetries      []int32
		// retries and failures
		retryIDs  []uuid.UUID
		retryErrs []string
		failIDs   []uuid.UUID
		failErrs  []string
		expireIDs []uuid.UUID
	)
	for _, c := range batch {
		r, ok := loaded[c.ID]
		out := DeliveryOutcome{RequestID: c.ID}
		switch {
		case !ok || !r.held:
			out.Outcome, out.Error = OutcomeStale, "claim epoch no longer holds the request: refused"
		case r.status != StatusProcessing:
			// Recorded by an earlier run of this delivery: report it again.
			out.Outcome = map[string]string{StatusDispatched: OutcomeDispatched, StatusPending: OutcomeRetry,
				StatusFailed: OutcomeFailed, StatusExpired: OutcomeExpired}[r.status]
			out.CommandID = r.existingCommandID
			if r.lastError != nil && out.Outcome != OutcomeDispatched {
				out.Error = *r.lastError
			}
			if out.Outcome == OutcomeRetry {
				t := r.nextAttempt
				out.NextAttemptAt = &t
			}
		case r.expired:
			out.Outcome, out.Error = OutcomeExpired, "expired 24h after creation before it could be dispatched"
			expireIDs = append(expireIDs, r.id)
		case r.deregistered || !r.live:
			reason := fmt.Sprintf("no live Thorax for target %s", r.target)
			if r.deregistered {
				reason = fmt.Sprintf("target %s is deregistered", r.target)
			}
			out.Error = reason
			if r.attempts+1 >= MaxDispatchDeliveries {
				out.Outcome = OutcomeFailed
				failIDs, failErrs = append(failIDs, r.id), append(failErrs, reason)
			} else {
				out.Outcome = OutcomeRetry
				retryIDs, retryErrs = append(retryIDs, r.id), append(retryErrs, reason)
			}
		default:
			id := uuid.Must(uuid.NewV7())
			out.Outcome, out.CommandID, out.Queued = OutcomeDispatched, &id, r.queued
			// max_retries is the retries this delivery leaves: 0 on the last one, which
			// then skips the broker's free requeue too.
			retries := MaxDispatchRetries - r.attempts
			out.Command = &DispatchedCommand{ID: id, Target: r.target, Mode: r.mode, Priority: r.priority, AssignedInstanceID: r.instance,
				MaxRetries: retries}
			cmdIDs, cmdReqs, cmdRetries = append(cmdIDs, id), append(cmdReqs, r.id), append(cmdRetries, int32(retries))
		}
		outcomes = append(outcomes, out)
	}

	retryAt := map[uuid.UUID]time.Time{}
	b := &pgx.Batch{}
	if len(cmdIDs) > 0 {
		b.Queue(`
			INSERT INTO command_queue (id, dispatch_request_id, dispatch_attempt, target_id, deployment_id, step_position,
			                           command, timeout, env, working_dir, priority, mode, assigned_instance_id, max_retries)
			SELECT n.id, p.id, p.attempts, p.target_id, p.deployment_id, p.step_position,
			       p.command, p.timeout, p.env, p.working_dir, p.priority, t.mode, t.assigned_instance_id, n.retries
			FROM unnest($1::uuid[], $2::uuid[], $3::int[]) AS n(id, req, retries)
			JOIN pending_dispatch_requests p ON p.id = n.req
			JOIN targets t ON t.id = p.target_id`, cmdIDs, cmdReqs, cmdRetries)
		b.Queue(`
			UPDATE pending_dispatch_requests
			SET status = 'dispatched', dispatched_at = now(), last_error = NULL
			WHERE id = ANY($1)`, cmdReqs)
	}
	if len(retryIDs) > 0 {
		// Backoffs are added to the database clock, the one all replicas share.
		b.Queue(`
			UPDATE pending_dispatch_requests p
			SET status = 'pending', attempts = p.attempts + 1,
			    next_attempt_at = now() + dispatch_backoff(p.attempts + 1), last_error = r.err
			FROM unnest($1::uuid[], $2::text[]) AS r(id, err)
			WHERE p.id = r.id
			RETURNING p.id, p.next_attempt_at`, retryIDs, retryErrs).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var id uuid.UUID
				var at time.Time
				if err := rows.Scan(&id, &at); err != nil {
					return err
				}
				retryAt[id] = at
			}
			return rows.Err()
		})
	}
	if len(failIDs) > 0 {
		b.Queue(`
			UPDATE pending_dispatch_requests p
			SET status = 'failed', attempts = p.attempts + 1, finished_at = now(), last_error = r.err
			FROM unnest($1::uuid[], $2::text[]) AS r(id, err)
			WHERE p.id = r.id`, failIDs, failErrs)
	}
	if len(expireIDs) > 0 {
		b.Queue(`
			UPDATE pending_dispatch_requests
			SET status = 'expired', finished_at = now(), last_error = 'expired 24h after creation'
			WHERE id = ANY($1)`, expireIDs)
	}
	if b.Len() > 0 {
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return nil, fmt.Errorf("recording batch outcomes: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("committing batch outcomes: %w", err)
	}
	for i := range outcomes {
		if at, ok := retryAt[outcomes[i].RequestID]; ok {
			outcomes[i].NextAttemptAt = &at
		}
	}
	return outcomes, nil
}

// maxRequestText bounds each free-text field of a dispatch request.
const maxRequestText = 64 << 10

// unstorableRequestText names each text field of r that PostgreSQL could not store
// (NUL, not UTF-8) or that passes maxRequestText, so the request is refused by field
// instead of failing the insert.
func unstorableRequestText(at string, r NewDispatchRequest) []string {
	var problems []string
	check := func(field, text string) {
		if p := safetext.Unstorable(text, maxRequestText); p != "" {
			problems = append(problems, fmt.Sprintf("%s.%s: %s", at, field, p))
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

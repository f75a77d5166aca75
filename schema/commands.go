package schema

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mantis-deploy/mantis/internal/safetext"
)

// Command is a command_queue row as a Thorax instance receives it.
type Command struct {
	ID uuid.UUID
	// DispatchRequestID is the request the command delivers: the agent's idempotency
	// key, since a redelivery is a new command of the same request.
	DispatchRequestID uuid.UUID
	Target            string
	Mode              string
	Command           string
	Timeout           time.Duration
	Priority          string
	LeaseEpoch        int64
	DeploymentID      *uuid.UUID
	StepPosition      *int
	Env               map[string]string
	WorkingDir        string
	ListenAddress     string
	MaxRetries        int
}

// ErrNotHeld is returned when a Thorax instance writes about a command that is not in
// the state its call needs at the epoch it names: the epoch is stale (the command was
// claimed again since), or the command ended otherwise (cancelled, lost). The error
// says which.
var ErrNotHeld = errors.New("command is not held at this lease epoch")

// ErrInstanceDead is returned for calls from an instance that is unknown or was marked
// dead; it must register again.
var ErrInstanceDead = errors.New("thorax instance is unknown or was marked dead: register again")

// FetchCommandsRequest names what a Thorax instance claims.
type FetchCommandsRequest struct {
	InstanceID  uuid.UUID
	PollTargets []string
	Max         int
	// CommandIDs, when set, restricts the claim to these commands.
	CommandIDs []uuid.UUID
}

// FetchPendingCommands claims queued commands for the instance: those of listen-mode
// targets assigned to it and of the poll-mode targets it names, highest priority then
// oldest first, each at a new lease epoch. Poll-mode targets it names become its own.
func FetchPendingCommands(ctx context.Context, db TxBeginner, r FetchCommandsRequest) ([]Command, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := requireLive(ctx, tx, r.InstanceID); err != nil {
		return nil, err
	}
	if len(r.PollTargets) > 0 {
		if _, err := tx.Exec(ctx, `
			UPDATE targets SET assigned_instance_id = $1, updated_at = now()
			WHERE name = ANY($2) AND mode = 'poll' AND assigned_instance_id IS DISTINCT FROM $1`, r.InstanceID, r.PollTargets); err != nil {
			return nil, fmt.Errorf("assigning poll targets: %w", err)
		}
	}
	rows, err := tx.Query(ctx, `
		WITH due AS (
		    SELECT c.id FROM command_queue c
		    JOIN targets t ON t.id = c.target_id
		    WHERE c.status = 'queued'
		      AND ((t.mode = 'listen' AND t.assigned_instance_id = $1) OR (t.mode = 'poll' AND t.name = ANY($2)))
		      AND (coalesce(cardinality($4::uuid[]), 0) = 0 OR c.id = ANY($4))
		    ORDER BY c.priority_rank, c.created_at
		    LIMIT $3
		    FOR UPDATE OF c SKIP LOCKED
		)
		UPDATE command_queue c
		SET status = 'running', holder_instance_id = $1, lease_epoch = c.lease_epoch + 1, claimed_at = now()
		FROM due, targets t
		WHERE c.id = due.id AND t.id = c.target_id
		RETURNING c.id, c.dispatch_request_id, t.name, t.mode, c.command, c.timeout, c.priority, c.lease_epoch, c.deployment_id, c.step_position,
		          c.env, coalesce(c.working_dir, ''), coalesce(t.address, ''), c.max_retries, c.priority_rank, c.created_at`,
		r.InstanceID, r.PollTargets, max(r.Max, 1), r.CommandIDs)
	if err != nil {
		return nil, fmt.Errorf("claiming commands: %w", err)
	}
	type ranked struct {
		Command
		rank    int
		created time.Time
	}
	var out []ranked
	for rows.Next() {
		var (
			c    ranked
			step *int32
			env  []byte
		)
		if err := rows.Scan(&c.ID, &c.DispatchRequestID, &c.Target, &c.Mode, &c.Command.Command, &c.Timeout, &c.Priority, &c.LeaseEpoch, &c.DeploymentID, &step,
			&env, &c.WorkingDir, &c.ListenAddress, &c.MaxRetries, &c.rank, &c.created); err != nil {
			rows.Close()
			return nil, fmt.Errorf("claiming commands: %w", err)
		}
		if step != nil {
			s := int(*step)
			c.StepPosition = &s
		}
		if err := json.Unmarshal(env, &c.Env); err != nil {
			rows.Close()
			return nil, fmt.Errorf("command %s env: %w", c.ID, err)
		}
		out = append(out, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("claiming commands: %w", err)
	}
	for _, c := range out {
		if c.DeploymentID == nil {
			continue
		}
		if err := InsertEvent(ctx, tx, c.DeploymentID, "target.running", map[string]any{
			"step_position": c.StepPosition, "target": c.Target, "command_id": c.ID, "instance_id": r.InstanceID,
		}); err != nil {
			return nil, err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, err
	}
	// UPDATE ... RETURNING has no order: restore the claim order.
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].rank != out[j].rank {
			return out[i].rank < out[j].rank
		}
		return out[i].created.Before(out[j].created)
	})
	cmds := make([]Command, len(out))
	for i, c := range out {
		cmds[i] = c.Command
	}
	return cmds, nil
}

// CommandResult is what a run produced.
type CommandResult struct {
	ExitCode int
	// Output is the bytes the command printed, in any encoding, NUL and escape
	// sequences included (a Go string holds any bytes).
	Output          string
	OutputTruncated bool
	TimedOut        bool
	Cancelled       bool
	// Error is free text from outside; it is stored as safetext.Bound makes it.
	Error      string
	StartedAt  time.Time
	FinishedAt time.Time
}

// Succeeded reports whether the run counts as a success: it ran, was not killed, and
// exited 0.
func (r CommandResult) Succeeded() bool {
	return r.Error == "" && !r.TimedOut && !r.Cancelled && r.ExitCode == 0
}

// StoredResult says what StoreCommandResult recorded.
type StoredResult struct {
	CommandID    uuid.UUID
	Status       string
	DeploymentID *uuid.UUID
	StepPosition *int
	Target       string
	// Replayed is true when a result at the same lease epoch was stored already.
	Replayed bool
}

// Bounds on the output a result stores. The raw bound is also the CHECK on
// command_queue.output_raw.
const (
	// MaxRawOutputBytes is how much of what a command printed is kept as bytes: the end.
	MaxRawOutputBytes = 1 << 20
	// DisplayOutputBytes is how many of the last raw bytes command_queue.output holds
	// as display text.
	DisplayOutputBytes = MaxAnalysisInput
	// OutputTailBytes is how many of the last raw bytes events and views show.
	OutputTailBytes = 4096
)

// resultText is a result's free text as it is stored: the raw output bounded, its
// display forms, and the error bounded and made valid text.
type resultText struct {
	raw       []byte
	truncated bool
	display   string
	tail      string
	errText   *string
	analysis  string
}

// storedText bounds and converts a result's free text. Nothing is refused: output
// beyond MaxRawOutputBytes keeps its end and is marked truncated, a long error is cut
// with a marker, and display text never holds NUL or invalid UTF-8.
func storedText(r CommandResult) resultText {
	t := resultText{raw: []byte(r.Output), truncated: r.OutputTruncated}
	if len(t.raw) > MaxRawOutputBytes {
		t.raw, t.truncated = safetext.Tail(t.raw, MaxRawOutputBytes), true
	}
	t.display = safetext.DisplayTail(t.raw, DisplayOutputBytes)
	t.tail = safetext.DisplayTail(t.raw, OutputTailBytes)
	errText := r.Error
	switch {
	case errText == "" && r.TimedOut:
		errText = "timed out"
	case errText == "" && r.Cancelled:
		errText = "cancelled"
	}
	errText = safetext.Bound(errText, safetext.MaxErrorBytes)
	if errText != "" {
		t.errText = &errText
	}
	t.analysis = t.display + "\n" + errText
	return t
}

// StoreCommandResult records the result of a running command at its current lease
// epoch, the fencing token, and records instance as the one that delivered it: any
// Thorax instance may forward a result, whichever instance claimed the command. A
// result at a stale epoch, or for a command that ended otherwise (cancelled, lost), gets
// ErrNotHeld saying which; an unknown command, ErrNotFound. Storing the result of the
// same epoch again (a retried or forwarded call) is accepted once. Any
// output is accepted: its bytes are kept in output_raw, its display text is what the
// event, the views and the analysis read.
func StoreCommandResult(ctx context.Context, db DB, instance, command uuid.UUID, epoch int64, r CommandResult) (StoredResult, error) {
	status := "failed"
	if r.Succeeded() {
		status = "succeeded"
	}
	text := storedText(r)
	var (
		out  = StoredResult{CommandID: command, Status: status}
		step *int32
	)
	// One statement, one round trip: the result, its target event and the analysis
	// request commit together.
	err := db.QueryRow(ctx, `
		WITH stored AS (
		    UPDATE command_queue c
		    SET status = $4, exit_code = $5, output = $6, output_truncated = $7, error = $8,
		        started_at = $9, finished_at = $10, output_raw = $13, result_instance_id = $2
		    FROM targets t
		    WHERE c.id = $1 AND c.lease_epoch = $3 AND c.status = 'running' AND t.id = c.target_id
		    RETURNING c.id, c.deployment_id, c.step_position, t.name
		), event AS (
		    INSERT INTO deployment_events (deployment_id, type, data)
		    SELECT s.deployment_id, 'target.' || $4,
		           jsonb_build_object('step_position', s.step_position, 'target', s.name, 'command_id', s.id,
		                              'exit_code', $5::int, 'output_tail', $11::text, 'output_truncated', $7::bool)
		           || CASE WHEN $8::text IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('error', $8::text) END
		    FROM stored s WHERE s.deployment_id IS NOT NULL
		), analysis AS (
		    INSERT INTO analyses (command_id, source, input)
		    SELECT s.id, 'internal', right($12, $14) FROM stored s WHERE $4 = 'failed'
		    ON CONFLICT (command_id) DO NOTHING
		)
		SELECT deployment_id, step_position, name FROM stored`,
		command, instance, epoch, status, r.ExitCode, text.display, text.truncated, text.errText, nullTime(r.StartedAt), nullTime(r.FinishedAt),
		text.tail, text.analysis, text.raw, MaxAnalysisInput).
		Scan(&out.DeploymentID, &step, &out.Target)
	if errors.Is(err, pgx.ErrNoRows) {
		st, err := resultRefusal(ctx, db, command, epoch)
		if err != nil {
			return StoredResult{}, err
		}
		out.Status, out.Replayed = st, true
		return out, nil
	}
	if err != nil {
		return StoredResult{}, fmt.Errorf("storing result of %s: %w", command, err)
	}
	if step != nil {
		s := int(*step)
		out.StepPosition = &s
	}
	return out, nil
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// ScheduleRedispatch answers a Thorax asking for another dispatch of a command it
// holds at epoch, or, at UnclaimedLeaseEpoch, of a queued command nobody claimed (its
// nudge failed for good): the command is cancelled and its request goes back to
// pending with attempts + 1 and a backoff — unless the budget is spent or the request
// expired, in which case Mandible refuses and the request ends failed or expired.
func ScheduleRedispatch(ctx context.Context, db DB, instance, command uuid.UUID, epoch int64, reason string) (RedispatchResult, error) {
	if reason == "" {
		reason = "Thorax asked for another dispatch"
	}
	if epoch == UnclaimedLeaseEpoch {
		return scheduleUnclaimedRedispatch(ctx, db, instance, command, reason)
	}
	res, err := failDelivery(ctx, db, reason,
		`c.id = $3 AND c.holder_instance_id = $4 AND c.lease_epoch = $5 AND c.status = 'running'`, command, instance, epoch)
	if err != nil {
		return RedispatchResult{}, err
	}
	if len(res) == 0 {
		var exists bool
		if err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM command_queue WHERE id = $1)`, command).Scan(&exists); err != nil {
			return RedispatchResult{}, err
		}
		if !exists {
			return RedispatchResult{}, ErrNotFound
		}
		return RedispatchResult{}, ErrNotHeld
	}
	return res[0], nil
}

// CommandLease names a held command and its epoch.
type CommandLease struct {
	ID    uuid.UUID
	Epoch int64
}

// ReleaseCommands hands held commands back to the queue unrun, so another instance can
// claim them. Commands no longer held at the given epoch are skipped.
func ReleaseCommands(ctx context.Context, db DB, instance uuid.UUID, leases []CommandLease) (int, error) {
	ids := make([]uuid.UUID, len(leases))
	epochs := make([]int64, len(leases))
	for i, l := range leases {
		ids[i], epochs[i] = l.ID, l.Epoch
	}
	tag, err := db.Exec(ctx, `
		UPDATE command_queue c SET status = 'queued', holder_instance_id = NULL, claimed_at = NULL
		FROM unnest($2::uuid[], $3::bigint[]) AS l(id, epoch)
		WHERE c.id = l.id AND c.lease_epoch = l.epoch AND c.holder_instance_id = $1 AND c.status = 'running'`,
		instance, ids, epochs)
	if err != nil {
		return 0, fmt.Errorf("releasing commands: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

func requireLive(ctx context.Context, db DB, instance uuid.UUID) error {
	var status string
	err := db.QueryRow(ctx, `SELECT status FROM thorax_instances WHERE id = $1`, instance).Scan(&status)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && status == "dead") {
		return ErrInstanceDead
	}
	return err
}

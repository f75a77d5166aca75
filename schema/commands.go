package schema

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mantis-deploy/mantis/internal/contract/events"
	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/schema/internal/dbsqlc"
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
	// TraceParent is the W3C trace context the command was enqueued in, "" for none.
	TraceParent string
}

// ErrNotHeld is returned when a Thorax instance writes about a command that is not in
// the state its call needs at the epoch it names: the epoch is stale (the command was
// claimed again since), or the command ended otherwise (cancelled, lost). The error
// says which.
var ErrNotHeld = errors.New("command is not held at this lease epoch")

// ErrNotOwn is returned for a result from a caller that neither holds the command nor
// forwards it for the command's own target: an identity acting on what is not its
// own. The error says which, and names no epoch.
var ErrNotOwn = errors.New("result refused: its caller neither holds the command nor reports for its target")

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
	// MaxBytes bounds the commands claimed by their stored size (text, env, working
	// directory and a little for the rest): the claim stops before they pass it, the
	// first command always taken. Zero means no bound.
	MaxBytes int64
}

// FetchPendingCommands claims queued commands for the instance: those of listen-mode
// targets assigned to it and of the poll-mode targets it names, highest priority then
// oldest first, each at a new lease epoch, with a target.running event for each command
// of a deployment. Poll-mode targets it names become its own.
func FetchPendingCommands(ctx context.Context, db TxBeginner, r FetchCommandsRequest) ([]Command, error) {
	var cmds []Command
	err := inTx(ctx, db, func(tx pgx.Tx) error {
		if err := requireLive(ctx, tx, r.InstanceID); err != nil {
			return err
		}
		if len(r.PollTargets) > 0 {
			if err := queries.AssignPollTargets(ctx, tx, dbsqlc.AssignPollTargetsParams{InstanceID: r.InstanceID, Names: r.PollTargets}); err != nil {
				return fmt.Errorf("assigning poll targets: %w", err)
			}
		}
		rows, err := queries.ClaimCommands(ctx, tx, dbsqlc.ClaimCommandsParams{
			InstanceID: r.InstanceID, PollTargets: r.PollTargets, CommandIds: r.CommandIDs, MaxRows: int32(max(r.Max, 1)),
			MaxBytes: cmp.Or(r.MaxBytes, math.MaxInt64),
		})
		if err != nil {
			return fmt.Errorf("claiming commands: %w", err)
		}
		for _, row := range rows {
			c, err := claimedCommand(row)
			if err != nil {
				return err
			}
			if err := recordRunning(ctx, tx, c, r.InstanceID); err != nil {
				return err
			}
			cmds = append(cmds, c)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return cmds, nil
}

// claimedCommand turns a claimed row into a Command.
func claimedCommand(row dbsqlc.ClaimCommandsRow) (Command, error) {
	c := Command{
		ID: row.ID, DispatchRequestID: row.DispatchRequestID, Target: row.Target, Mode: row.Mode, Command: row.Command,
		Timeout: row.Timeout, Priority: row.Priority, LeaseEpoch: row.LeaseEpoch, DeploymentID: row.DeploymentID,
		StepPosition: stepPosition(row.StepPosition), WorkingDir: row.WorkingDir, ListenAddress: row.ListenAddress, MaxRetries: int(row.MaxRetries),
		TraceParent: row.TraceParent,
	}
	if err := json.Unmarshal(row.Env, &c.Env); err != nil {
		return Command{}, fmt.Errorf("command %s env: %w", c.ID, err)
	}
	return c, nil
}

// recordRunning writes the target.running event of a claimed command of a deployment.
func recordRunning(ctx context.Context, db DB, c Command, instance uuid.UUID) error {
	if c.DeploymentID == nil {
		return nil
	}
	return InsertEvent(ctx, db, c.DeploymentID, string(events.TargetRunning), events.TargetRunningData{
		StepPosition: c.StepPosition, Target: c.Target, CommandID: c.ID, InstanceID: instance,
	})
}

// CommandLease names a held command and its epoch.
type CommandLease struct {
	ID    uuid.UUID
	Epoch int64
}

// ReleaseCommands hands held commands back to the queue unrun, so another instance can
// claim them. Commands no longer held at the given epoch are skipped.
func ReleaseCommands(ctx context.Context, db DB, instance uuid.UUID, leases []CommandLease) (int, error) {
	p := dbsqlc.ReleaseCommandsParams{InstanceID: instance, Ids: make([]uuid.UUID, len(leases)), Epochs: make([]int64, len(leases))}
	for i, l := range leases {
		p.Ids[i], p.Epochs[i] = l.ID, l.Epoch
	}
	n, err := queries.ReleaseCommands(ctx, db, p)
	if err != nil {
		return 0, fmt.Errorf("releasing commands: %w", err)
	}
	return int(n), nil
}

// requireLive returns ErrInstanceDead for an instance that is unknown or dead.
func requireLive(ctx context.Context, db DB, instance uuid.UUID) error {
	status, err := queries.InstanceStatus(ctx, db, instance)
	if errors.Is(notFound(err), ErrNotFound) || (err == nil && status == domain.InstanceDead) {
		return ErrInstanceDead
	}
	if err != nil {
		return fmt.Errorf("reading the status of thorax instance %s: %w", instance, err)
	}
	return nil
}

// stepPosition converts a nullable step_position column.
func stepPosition(v *int32) *int {
	if v == nil {
		return nil
	}
	p := int(*v)
	return &p
}

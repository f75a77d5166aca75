package schema

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mantis-deploy/mantis/internal/contract/events"
	"github.com/mantis-deploy/mantis/schema/internal/dbsqlc"
)

// Live output: chunks of a running command's output that its agent streams through
// the Thorax holding the command. Each chunk is stored once (command id and seq), up
// to a bound per command, and each stored chunk is a target.output event in the same
// transaction.

// DefaultMaxOutputBytesPerCommand is the default bound on the live output stored per
// command (output.max_bytes_per_command).
const DefaultMaxOutputBytesPerCommand = 1 << 20

// OutputTrailGrace is how long after its result a command still takes output chunks
// from its holder: the last chunks may trail the result, which never waits for them.
const OutputTrailGrace = 5 * time.Minute

// OutputTruncatedMarker is the data of the chunk stored in place of what passes a
// command's bound.
const OutputTruncatedMarker = "\n[mantis: live output truncated: output.max_bytes_per_command reached; the result keeps the output's tail]\n"

// OutputChunk is one piece of a command's output as its agent cut it.
type OutputChunk struct {
	Seq  int64
	Data []byte
}

// StoreOutputRequest is a batch of one command's chunks from the Thorax holding it.
type StoreOutputRequest struct {
	InstanceID uuid.UUID
	CommandID  uuid.UUID
	LeaseEpoch int64
	// Target, when set, must be the command's target (the agent that sent the chunks).
	Target string
	Chunks []OutputChunk
	// MaxBytes bounds the output stored for the command; past it one truncation marker
	// is stored and nothing more. Zero means DefaultMaxOutputBytesPerCommand.
	MaxBytes int64
}

// StoredOutput says what became of a batch.
type StoredOutput struct {
	// Stored counts the chunks stored now; a chunk stored before (a retried call) is
	// not counted again.
	Stored int
	// Truncated says the command's bound is reached: later chunks are dropped.
	Truncated bool
}

// StoreCommandOutput stores the chunks of a command that req.InstanceID holds at
// req.LeaseEpoch (running, or ended less than OutputTrailGrace ago), each once, and
// writes a target.output event for each chunk stored. A command held by another
// instance, or at another epoch, is ErrNotHeld; an unknown command, ErrNotFound.
func StoreCommandOutput(ctx context.Context, db TxBeginner, req StoreOutputRequest) (StoredOutput, error) {
	if req.MaxBytes <= 0 {
		req.MaxBytes = DefaultMaxOutputBytesPerCommand
	}
	chunks := slices.Clone(req.Chunks)
	slices.SortFunc(chunks, func(a, b OutputChunk) int { return cmp.Compare(a.Seq, b.Seq) })
	var out StoredOutput
	err := inTx(ctx, db, func(tx pgx.Tx) error {
		holder, err := queries.OutputHolder(ctx, tx, dbsqlc.OutputHolderParams{
			CommandID: req.CommandID, InstanceID: req.InstanceID, LeaseEpoch: req.LeaseEpoch, Grace: OutputTrailGrace,
			Target: nullString(req.Target),
		})
		if err != nil {
			return outputRefusal(ctx, tx, req, err)
		}
		total, err := queries.LockOutputTotal(ctx, tx, req.CommandID)
		if err != nil {
			return fmt.Errorf("locking the output total: %w", err)
		}
		w := outputWriter{tx: tx, req: req, holder: holder, bytes: total.Bytes, truncated: total.Truncated}
		for _, c := range chunks {
			if err := w.add(ctx, c); err != nil {
				return err
			}
		}
		out = StoredOutput{Stored: w.stored, Truncated: w.truncated}
		return queries.SetOutputTotal(ctx, tx, dbsqlc.SetOutputTotalParams{
			CommandID: req.CommandID, Bytes: w.bytes, Truncated: w.truncated,
		})
	})
	if err != nil {
		return StoredOutput{}, fmt.Errorf("storing output of command %s: %w", req.CommandID, err)
	}
	return out, nil
}

// outputRefusal says why no holder row was found: ErrNotFound for an unknown command,
// ErrNotHeld naming the caller otherwise.
func outputRefusal(ctx context.Context, tx pgx.Tx, req StoreOutputRequest, err error) error {
	if !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("reading the command's holder: %w", err)
	}
	exists, err := queries.OutputCommandExists(ctx, tx, req.CommandID)
	if err != nil {
		return fmt.Errorf("reading the command: %w", err)
	}
	if !exists {
		return ErrNotFound
	}
	return fmt.Errorf("%w: instance %s does not hold it at the epoch it names for target %q (or it ended over %s ago)",
		ErrNotHeld, req.InstanceID, req.Target, OutputTrailGrace)
}

// outputWriter stores one batch's chunks within the command's bound.
type outputWriter struct {
	tx        pgx.Tx
	req       StoreOutputRequest
	holder    dbsqlc.OutputHolderRow
	bytes     int64
	truncated bool
	stored    int
}

// add stores c, or the part of it within the bound and then the truncation marker.
func (w *outputWriter) add(ctx context.Context, c OutputChunk) error {
	if w.truncated {
		return nil
	}
	data, marker := c.Data, false
	if room := w.req.MaxBytes - w.bytes; int64(len(data)) > room {
		// The marker takes this seq: the part that fits would need one of its own.
		data, marker = []byte(OutputTruncatedMarker), true
	}
	_, err := queries.InsertOutputChunk(ctx, w.tx, dbsqlc.InsertOutputChunkParams{
		CommandID: w.req.CommandID, Seq: c.Seq, DispatchRequestID: w.holder.DispatchRequestID,
		DeploymentID: w.holder.DeploymentID, StepPosition: w.holder.StepPosition, Target: w.holder.Target,
		Data: data, Truncated: marker,
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil // stored before: a retried chunk
	}
	if err != nil {
		return fmt.Errorf("inserting chunk %d: %w", c.Seq, err)
	}
	w.stored++
	w.truncated = marker
	if !marker {
		w.bytes += int64(len(data))
	}
	return InsertEvent(ctx, w.tx, w.holder.DeploymentID, events.TargetOutput, events.TargetOutputData{
		DeploymentID: w.holder.DeploymentID, Step: intPtr(w.holder.StepPosition), Target: w.holder.Target,
		RequestID: w.holder.DispatchRequestID, CommandID: w.req.CommandID, Seq: c.Seq, Data: data, Truncated: marker,
	})
}

// OutputFilter selects a deployment's stored chunks. Zero fields do not filter.
type OutputFilter struct {
	Target string
	Step   *int
	// After reads the chunks stored after the one with this id (a page's NextAfter).
	After int64
}

// StoredChunk is one stored chunk of a deployment's output.
type StoredChunk struct {
	ID        int64
	CommandID uuid.UUID
	RequestID uuid.UUID
	Seq       int64
	Step      *int
	Target    string
	Data      []byte
	Truncated bool
	CreatedAt time.Time
}

// ReadDeploymentOutput returns deployment's chunks that match f, in the order they were
// stored, at most limit of them.
func ReadDeploymentOutput(ctx context.Context, db DB, deployment uuid.UUID, f OutputFilter, limit int) ([]StoredChunk, error) {
	p := dbsqlc.ReadDeploymentOutputParams{DeploymentID: &deployment, After: f.After, MaxRows: int32(limit)}
	if f.Target != "" {
		p.Target = &f.Target
	}
	if f.Step != nil {
		s := int32(*f.Step)
		p.Step = &s
	}
	rows, err := queries.ReadDeploymentOutput(ctx, db, p)
	if err != nil {
		return nil, fmt.Errorf("reading output of deployment %s: %w", deployment, err)
	}
	out := make([]StoredChunk, len(rows))
	for i, r := range rows {
		out[i] = StoredChunk{ID: r.ID, CommandID: r.CommandID, RequestID: r.DispatchRequestID, Seq: r.Seq,
			Step: intPtr(r.StepPosition), Target: r.Target, Data: r.Data, Truncated: r.Truncated, CreatedAt: r.CreatedAt}
	}
	return out, nil
}

package schema

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/internal/safetext"
	"github.com/mantis-deploy/mantis/schema/internal/dbsqlc"
)

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
// epoch, the fencing token, and records in.Instance as the one that delivered it. The
// instance holding the command stores its result, and so does an instance forwarding
// it for the command's own target (in.Target, the reporting agent's certificate name):
// a poll agent reports through whichever instance it reaches. A result from any other
// caller gets ErrNotOwn; one at a stale epoch, or for a command that ended otherwise
// (cancelled, lost), ErrNotHeld saying which; an unknown command, ErrNotFound. Storing the result of the
// same epoch again (a retried or forwarded call) is accepted once. Any
// output is accepted: its bytes are kept in output_raw, its display text is what the
// event, the views and the analysis read.
func StoreCommandResult(ctx context.Context, db DB, in ResultToStore) (StoredResult, error) {
	instance, command, epoch, r := in.Instance, in.Command, in.Epoch, in.Result
	status := domain.CommandFailed
	if r.Succeeded() {
		status = domain.CommandSucceeded
	}
	text := storedText(r)
	out := StoredResult{CommandID: command, Status: status}
	// One statement, one round trip: the result, its target event and the analysis
	// request commit together.
	row, err := queries.StoreCommandResult(ctx, db, dbsqlc.StoreCommandResultParams{
		Status: status, ExitCode: int32(r.ExitCode), Output: text.display, OutputTruncated: text.truncated, Error: text.errText,
		StartedAt: nullTime(r.StartedAt), FinishedAt: nullTime(r.FinishedAt), OutputRaw: text.raw, InstanceID: instance,
		CommandID: command, LeaseEpoch: epoch, Target: in.Target, OutputTail: text.tail, AnalysisInput: text.analysis, MaxAnalysisInput: MaxAnalysisInput,
	})
	if errors.Is(err, pgx.ErrNoRows) {
		st, err := resultRefusal(ctx, db, in)
		if err != nil {
			return StoredResult{}, err
		}
		out.Status, out.Replayed = st, true
		return out, nil
	}
	if err != nil {
		return StoredResult{}, fmt.Errorf("storing result of %s: %w", command, err)
	}
	out.DeploymentID, out.StepPosition, out.Target = row.DeploymentID, stepPosition(row.StepPosition), row.Name
	return out, nil
}

// nullTime is nil for the zero time.
func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

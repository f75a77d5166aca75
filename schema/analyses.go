package schema

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/mantis-deploy/mantis/internal/safetext"
	"github.com/mantis-deploy/mantis/schema/internal/dbsqlc"
)

// Analysis sources: Mantis queues its own for failed commands; external publishers send
// theirs on mantis.analysis.requests.
const (
	AnalysisInternal = "internal"
	AnalysisExternal = "external"
)

// AnalysisSources lists every analysis source (analyses.source).
var AnalysisSources = []string{AnalysisInternal, AnalysisExternal}

// MaxAnalysisInput is how much of a command's output an analysis keeps: the end of it,
// where failures are reported. StoreCommandResult keeps the same.
const MaxAnalysisInput = 65536

// Analysis is an analyses row: the explanation of one failed command or one external
// request. Category, Summary, Suggestion and RefinedBy are empty until it is done.
type Analysis struct {
	ID         uuid.UUID  `json:"id"`
	CommandID  *uuid.UUID `json:"command_id,omitempty"`
	ExternalID string     `json:"external_id,omitempty"`
	Source     string     `json:"source"`
	Status     string     `json:"status"`
	Category   string     `json:"category,omitempty"`
	Summary    string     `json:"summary,omitempty"`
	Suggestion string     `json:"suggestion,omitempty"`
	RefinedBy  string     `json:"refined_by,omitempty"`
	Error      string     `json:"error,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
}

// analysisOf reads the analysis of an external request or of a command (the one of
// externalID and commandID that is not nil), or ErrNotFound.
func analysisOf(ctx context.Context, db DB, externalID *string, commandID *uuid.UUID) (Analysis, error) {
	r, err := queries.AnalysisOf(ctx, db, dbsqlc.AnalysisOfParams{ExternalID: externalID, CommandID: commandID})
	if err != nil {
		return Analysis{}, notFound(err)
	}
	return Analysis{
		ID: r.ID, CommandID: r.CommandID, ExternalID: r.ExternalID, Source: r.Source, Status: r.Status,
		Category: r.Category, Summary: r.Summary, Suggestion: r.Suggestion, RefinedBy: r.RefinedBy,
		Error: r.Error, CreatedAt: r.CreatedAt, FinishedAt: r.FinishedAt,
	}, nil
}

// AnalysisByExternalID returns the analysis of the external request with that
// request_id, or ErrNotFound.
func AnalysisByExternalID(ctx context.Context, db DB, externalID string) (Analysis, error) {
	a, err := analysisOf(ctx, db, &externalID, nil)
	if err != nil {
		return Analysis{}, fmt.Errorf("reading analysis of request %q: %w", externalID, err)
	}
	return a, nil
}

// AnalysisByCommandID returns the analysis of a failed command (queued from the moment
// the failure is stored until the analyser has run), or ErrNotFound when the command
// has none because it did not fail.
func AnalysisByCommandID(ctx context.Context, db DB, commandID uuid.UUID) (Analysis, error) {
	a, err := analysisOf(ctx, db, nil, &commandID)
	if err != nil {
		return Analysis{}, fmt.Errorf("reading analysis of command %s: %w", commandID, err)
	}
	return a, nil
}

// NewExternalAnalysis is an external request to store. Its exit code and timeout flag
// have no column, so the request is classified when it arrives and stored with that
// rule-based result, queued: the processor refines and finishes it.
type NewExternalAnalysis struct {
	ExternalID string
	Input      string
	Category   string
	Summary    string
	Suggestion string
}

// InsertExternalAnalysis stores an external request, queued. A request_id already
// stored is left as it is (a redelivered message) and Created is false. Its text comes
// from outside: the input's end is kept as display text (no NUL, valid UTF-8), and the
// rule-based texts derived from it are made display text too.
func InsertExternalAnalysis(ctx context.Context, db DB, a NewExternalAnalysis) (created bool, err error) {
	// Four bytes per character at most: the byte tail is never shorter than the
	// MaxAnalysisInput characters SQL keeps.
	a.Input = safetext.DisplayTail([]byte(a.Input), 4*MaxAnalysisInput)
	a.Category = safetext.DisplayString(a.Category)
	a.Summary = safetext.DisplayString(a.Summary)
	a.Suggestion = safetext.DisplayString(a.Suggestion)
	n, err := queries.InsertExternalAnalysis(ctx, db, dbsqlc.InsertExternalAnalysisParams{
		ExternalID: a.ExternalID, Input: a.Input, MaxInput: MaxAnalysisInput,
		Category: nullString(a.Category), Summary: nullString(a.Summary), Suggestion: nullString(a.Suggestion),
	})
	if err != nil {
		return false, fmt.Errorf("storing analysis request %q: %w", a.ExternalID, err)
	}
	return n == 1, nil
}

// QueuedAnalysis is a queued analysis with what explaining it needs. For internal rows
// the command's exit code, error and place in a deployment come along; for external
// rows Category, Summary and Suggestion hold the rule-based result stored on arrival.
type QueuedAnalysis struct {
	ID         uuid.UUID
	Source     string
	Input      string
	CommandID  *uuid.UUID
	ExternalID string
	Category   string
	Summary    string
	Suggestion string

	ExitCode     *int
	CommandError string
	Target       string
	DeploymentID *uuid.UUID
	StepPosition *int
}

// LockQueuedAnalyses locks up to limit queued analyses, oldest first, skipping those
// another transaction holds. Call it in a transaction: the rows stay locked, and so
// invisible to other processors, until it ends.
func LockQueuedAnalyses(ctx context.Context, tx DB, limit int) ([]QueuedAnalysis, error) {
	rows, err := queries.LockQueuedAnalyses(ctx, tx, int32(max(limit, 1)))
	if err != nil {
		return nil, fmt.Errorf("locking queued analyses: %w", err)
	}
	out := make([]QueuedAnalysis, len(rows))
	for i, r := range rows {
		out[i] = QueuedAnalysis{
			ID: r.ID, Source: r.Source, Input: r.Input, CommandID: r.CommandID, ExternalID: r.ExternalID,
			Category: r.Category, Summary: r.Summary, Suggestion: r.Suggestion,
			ExitCode: intPtr(r.ExitCode), CommandError: r.CommandError, Target: r.Target,
			DeploymentID: r.DeploymentID, StepPosition: intPtr(r.StepPosition),
		}
	}
	return out, nil
}

// AnalysisOutcome is what the analyser concluded.
type AnalysisOutcome struct {
	Category   string
	Summary    string
	Suggestion string
	// RefinedBy names what produced the summary: the rules or a model.
	RefinedBy string
	// Error says why a configured refinement did not happen; empty when it did or was off.
	Error string
}

// MaxAnalysisTextBytes bounds each text of an analysis outcome. A refining model's
// answer is text from outside: it is cut with a marker and made display text.
const MaxAnalysisTextBytes = 8 << 10

// FinishAnalysis records the outcome of a queued analysis and marks it done. It reports
// false when the row is no longer queued (another processor finished it).
func FinishAnalysis(ctx context.Context, db DB, id uuid.UUID, o AnalysisOutcome) (bool, error) {
	for _, f := range []*string{&o.Category, &o.Summary, &o.Suggestion, &o.RefinedBy, &o.Error} {
		*f = safetext.Bound(*f, MaxAnalysisTextBytes)
	}
	n, err := queries.FinishAnalysis(ctx, db, dbsqlc.FinishAnalysisParams{
		ID: id, Category: o.Category, Summary: o.Summary, Suggestion: o.Suggestion,
		RefinedBy: nullString(o.RefinedBy), Error: nullString(o.Error),
	})
	if err != nil {
		return false, fmt.Errorf("finishing analysis %s: %w", id, err)
	}
	return n == 1, nil
}

// FailAnalysis marks a queued analysis failed with the reason, so that a row that
// cannot be written does not hold up the queue.
func FailAnalysis(ctx context.Context, db DB, id uuid.UUID, reason string) error {
	reason = safetext.Bound(reason, MaxAnalysisTextBytes)
	if err := queries.FailAnalysis(ctx, db, dbsqlc.FailAnalysisParams{ID: id, Reason: reason}); err != nil {
		return fmt.Errorf("failing analysis %s: %w", id, err)
	}
	return nil
}

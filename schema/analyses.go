package schema

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/mantis-deploy/mantis/internal/safetext"
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

const analysisColumns = `id, command_id, coalesce(external_id, ''), source, status, coalesce(category, ''),
	coalesce(summary, ''), coalesce(suggestion, ''), coalesce(refined_by, ''), coalesce(error, ''), created_at, finished_at`

func scanAnalysis(row interface{ Scan(...any) error }) (Analysis, error) {
	var a Analysis
	err := row.Scan(&a.ID, &a.CommandID, &a.ExternalID, &a.Source, &a.Status, &a.Category,
		&a.Summary, &a.Suggestion, &a.RefinedBy, &a.Error, &a.CreatedAt, &a.FinishedAt)
	if err != nil {
		return Analysis{}, notFound(err)
	}
	return a, nil
}

// AnalysisByExternalID returns the analysis of the external request with that
// request_id, or ErrNotFound.
func AnalysisByExternalID(ctx context.Context, db DB, externalID string) (Analysis, error) {
	a, err := scanAnalysis(db.QueryRow(ctx, `SELECT `+analysisColumns+` FROM analyses WHERE external_id = $1`, externalID))
	if err != nil {
		return Analysis{}, fmt.Errorf("reading analysis of request %q: %w", externalID, err)
	}
	return a, nil
}

// AnalysisByCommandID returns the analysis of a failed command (queued from the moment
// the failure is stored until the analyser has run), or ErrNotFound when the command
// has none because it did not fail.
func AnalysisByCommandID(ctx context.Context, db DB, commandID uuid.UUID) (Analysis, error) {
	a, err := scanAnalysis(db.QueryRow(ctx, `SELECT `+analysisColumns+` FROM analyses WHERE command_id = $1`, commandID))
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
	tag, err := db.Exec(ctx, `
		INSERT INTO analyses (external_id, source, input, category, summary, suggestion)
		VALUES ($1, 'external', right($2, $3), $4, $5, $6)
		ON CONFLICT (external_id) DO NOTHING`,
		a.ExternalID, a.Input, MaxAnalysisInput, nullString(a.Category), nullString(a.Summary), nullString(a.Suggestion))
	if err != nil {
		return false, fmt.Errorf("storing analysis request %q: %w", a.ExternalID, err)
	}
	return tag.RowsAffected() == 1, nil
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
	rows, err := tx.Query(ctx, `
		SELECT a.id, a.source, a.input, a.command_id, coalesce(a.external_id, ''),
		       coalesce(a.category, ''), coalesce(a.summary, ''), coalesce(a.suggestion, ''),
		       c.exit_code, coalesce(c.error, ''), coalesce(t.name, ''), c.deployment_id, c.step_position
		FROM analyses a
		LEFT JOIN command_queue c ON c.id = a.command_id
		LEFT JOIN targets t ON t.id = c.target_id
		WHERE a.status = 'queued'
		ORDER BY a.created_at
		LIMIT $1
		FOR UPDATE OF a SKIP LOCKED`, max(limit, 1))
	if err != nil {
		return nil, fmt.Errorf("locking queued analyses: %w", err)
	}
	defer rows.Close()
	var out []QueuedAnalysis
	for rows.Next() {
		var (
			q          QueuedAnalysis
			exit, step *int32
		)
		if err := rows.Scan(&q.ID, &q.Source, &q.Input, &q.CommandID, &q.ExternalID,
			&q.Category, &q.Summary, &q.Suggestion,
			&exit, &q.CommandError, &q.Target, &q.DeploymentID, &step); err != nil {
			return nil, fmt.Errorf("locking queued analyses: %w", err)
		}
		if exit != nil {
			e := int(*exit)
			q.ExitCode = &e
		}
		if step != nil {
			s := int(*step)
			q.StepPosition = &s
		}
		out = append(out, q)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("locking queued analyses: %w", err)
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
	tag, err := db.Exec(ctx, `
		UPDATE analyses
		SET status = 'done', category = $2, summary = $3, suggestion = $4, refined_by = $5, error = $6, finished_at = now()
		WHERE id = $1 AND status = 'queued'`,
		id, o.Category, o.Summary, o.Suggestion, nullString(o.RefinedBy), nullString(o.Error))
	if err != nil {
		return false, fmt.Errorf("finishing analysis %s: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// FailAnalysis marks a queued analysis failed with the reason, so that a row that
// cannot be written does not hold up the queue.
func FailAnalysis(ctx context.Context, db DB, id uuid.UUID, reason string) error {
	reason = safetext.Bound(reason, MaxAnalysisTextBytes)
	if _, err := db.Exec(ctx, `
		UPDATE analyses SET status = 'failed', error = $2, finished_at = now()
		WHERE id = $1 AND status = 'queued'`, id, reason); err != nil {
		return fmt.Errorf("failing analysis %s: %w", id, err)
	}
	return nil
}

func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

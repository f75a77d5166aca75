package analysis

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mantis-deploy/mantis/internal/backoff"
	"github.com/mantis-deploy/mantis/schema"
)

// EventType is the deployment event that carries a command's analysis.
const EventType = "target.analysis"

// Defaults of a Processor.
const (
	// DefaultBatchSize is how many queued analyses one RunOnce takes.
	DefaultBatchSize = 10
	// DefaultInterval is how often Run looks for queued analyses. The analyses table has
	// no NOTIFY trigger, so Run polls: a failed command's analysis appears within about
	// this long. Consume wakes Run at once for what it stores.
	DefaultInterval = 500 * time.Millisecond
	// maxRefining bounds the concurrent calls to the model endpoint.
	maxRefining = 4
	// maxErrorWait caps the wait between RunOnce calls while they fail.
	maxErrorWait = 30 * time.Second
)

// Processor works through the queued rows of the analyses table: it classifies each,
// has the Refiner refine it when there is one, records the result, and for a command
// of a deployment appends a target.analysis event in the same transaction.
//
// Several processors (one per Mandible replica) share the table: each locks its batch
// with SKIP LOCKED, so a row is analysed once.
type Processor struct {
	DB     *pgxpool.Pool
	Logger *slog.Logger
	// Refiner refines the rules' summaries; nil leaves them as they are.
	Refiner *Refiner
	// BatchSize is how many rows one RunOnce takes; zero means DefaultBatchSize.
	BatchSize int

	wakeOnce sync.Once
	wake     chan struct{}
}

// Event is the data of a target.analysis event.
type Event struct {
	DeploymentID uuid.UUID `json:"deployment_id"`
	StepPosition *int      `json:"step_position"`
	Target       string    `json:"target"`
	CommandID    uuid.UUID `json:"command_id"`
	Category     string    `json:"category"`
	Summary      string    `json:"summary"`
	Suggestion   string    `json:"suggestion"`
	RefinedBy    string    `json:"refined_by"`
}

func (p *Processor) batchSize() int {
	if p.BatchSize > 0 {
		return p.BatchSize
	}
	return DefaultBatchSize
}

func (p *Processor) wakeC() chan struct{} {
	p.wakeOnce.Do(func() { p.wake = make(chan struct{}, 1) })
	return p.wake
}

// Wake makes a waiting Run look for queued analyses now.
func (p *Processor) Wake() {
	select {
	case p.wakeC() <- struct{}{}:
	default:
	}
}

// RunOnce analyses one batch of queued rows in one transaction and returns how many it
// finished. The rows stay locked while the model refines them (bounded by the
// refiner's timeout), so other processors skip rather than repeat them. A row that
// cannot be written is marked failed with the reason instead of blocking the queue.
func (p *Processor) RunOnce(ctx context.Context) (int, error) {
	tx, err := p.DB.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("starting analysis batch: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()

	rows, err := schema.LockQueuedAnalyses(ctx, tx, p.batchSize())
	if err != nil {
		return 0, err
	}
	if len(rows) == 0 {
		return 0, nil
	}
	results := make([]Result, len(rows))
	for i, row := range rows {
		results[i] = classifyRow(row)
	}
	if p.Refiner != nil {
		p.refine(ctx, rows, results)
	}

	finished := make([]bool, len(rows))
	done := 0
	for i, row := range rows {
		ok, err := p.finish(ctx, tx, row, results[i])
		if err != nil {
			if ctx.Err() != nil {
				return 0, ctx.Err()
			}
			p.Logger.ErrorContext(ctx, "could not record analysis, marking it failed", "analysis_id", row.ID, "err", err)
			if err := schema.FailAnalysis(ctx, tx, row.ID, err.Error()); err != nil {
				return 0, err
			}
			continue
		}
		if ok {
			finished[i] = true
			done++
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("committing analysis batch: %w", err)
	}
	for i, row := range rows {
		if !finished[i] {
			continue
		}
		p.Logger.InfoContext(ctx, "analysed failure", "analysis_id", row.ID, "source", row.Source,
			"command_id", row.CommandID, "external_id", row.ExternalID, "category", results[i].Category,
			"rule", results[i].Rule, "refined_by", results[i].RefinedBy, "refine_error", results[i].Error)
	}
	return done, nil
}

// classifyRow is the rules' result for a row. An internal row carries its command's
// exit code and error ("timed out" for a command killed at its timeout); an external
// row was classified on arrival, when its exit code was known.
func classifyRow(row schema.QueuedAnalysis) Result {
	if row.Category != "" {
		return Result{Category: row.Category, Summary: row.Summary, Suggestion: row.Suggestion, Rule: "stored", RefinedBy: RefinedByRules}
	}
	exitCode := 0
	if row.ExitCode != nil {
		exitCode = *row.ExitCode
	}
	return Classify(row.Input, exitCode, row.CommandError == "timed out")
}

// refine refines the batch's results concurrently, a few at a time.
func (p *Processor) refine(ctx context.Context, rows []schema.QueuedAnalysis, results []Result) {
	sem := make(chan struct{}, maxRefining)
	var wg sync.WaitGroup
	for i := range rows {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			results[i] = p.Refiner.Refine(ctx, rows[i].Input, results[i])
		}()
	}
	wg.Wait()
}

// finish records one row's result, and its event, under a savepoint: a failure undoes
// this row's writes only.
func (p *Processor) finish(ctx context.Context, tx pgx.Tx, row schema.QueuedAnalysis, res Result) (bool, error) {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer func() { _ = sp.Rollback(context.WithoutCancel(ctx)) }()
	ok, err := schema.FinishAnalysis(ctx, sp, row.ID, schema.AnalysisOutcome{
		Category:   res.Category,
		Summary:    res.Summary,
		Suggestion: res.Suggestion,
		RefinedBy:  res.RefinedBy,
		Error:      res.Error,
	})
	if err != nil || !ok {
		return false, err
	}
	if row.Source == schema.AnalysisInternal && row.CommandID != nil && row.DeploymentID != nil {
		if err := schema.InsertEvent(ctx, sp, row.DeploymentID, EventType, Event{
			DeploymentID: *row.DeploymentID,
			StepPosition: row.StepPosition,
			Target:       row.Target,
			CommandID:    *row.CommandID,
			Category:     res.Category,
			Summary:      res.Summary,
			Suggestion:   res.Suggestion,
			RefinedBy:    res.RefinedBy,
		}); err != nil {
			return false, err
		}
	}
	if err := sp.Commit(ctx); err != nil {
		return false, err
	}
	return true, nil
}

// Run calls RunOnce until ctx ends: again at once while batches come back full, else
// after interval (zero means DefaultInterval) or when Wake is called. Failures are
// logged and retried with a growing wait. It returns nil when ctx ends.
func (p *Processor) Run(ctx context.Context, interval time.Duration) error {
	if interval <= 0 {
		interval = DefaultInterval
	}
	p.Logger.InfoContext(ctx, "analysing failures", "interval", interval, "refined_by_model", p.Refiner != nil)
	errWait := backoff.Backoff{Min: interval, Max: maxErrorWait}
	for {
		n, err := p.RunOnce(ctx)
		if ctx.Err() != nil {
			return nil
		}
		wait := interval
		switch {
		case err != nil:
			wait = errWait.Next()
			p.Logger.ErrorContext(ctx, "analysing failures", "err", err, "retry_in", wait)
		case n >= p.batchSize():
			errWait.Reset()
			continue
		default:
			errWait.Reset()
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-timer.C:
		case <-p.wakeC():
			timer.Stop()
		}
	}
}

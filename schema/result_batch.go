package schema

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/schema/internal/dbsqlc"
)

// Defaults of a ResultBatcher.
const (
	// DefaultResultBatchMax is the most results one statement stores.
	DefaultResultBatchMax = 128
	// DefaultResultFlushes is how many batches may be in flight at once. A result that
	// arrives when none is goes at once, alone if need be, so batching adds no wait when
	// idle; one that arrives while a batch is in flight waits for the next, which starts
	// when that batch ends, or at once on another flush when a whole batch waits.
	DefaultResultFlushes = 4
	// resultFlushTimeout bounds one batch's transaction. It does not follow any one
	// caller's context: a caller giving up must not fail the others.
	resultFlushTimeout = 30 * time.Second
	// dataExceptionClass is PostgreSQL's SQLSTATE class of values it will not take
	// (out of range, invalid text): the result's fault, not the database's.
	dataExceptionClass = "22"
)

// ResultToStore is one result to store: the command, its lease epoch (the fencing
// token), the instance sending it, the target it reports for, and what the run
// produced.
type ResultToStore struct {
	Instance uuid.UUID
	Command  uuid.UUID
	Epoch    int64
	// Target is the target whose agent reported the result, as its certificate names
	// it: a result is stored from the instance holding the command, or when Target is
	// the command's own target. Empty, only the holder's result is stored.
	Target string
	Result CommandResult
}

// ResultBatcher stores results as StoreCommandResult does, but groups the results of
// concurrent callers into one statement and one transaction (group commit): while a
// batch is being written, the results that arrive queue up, and the next batch takes
// up to MaxBatch of them. A further flush, up to MaxFlushes in flight, starts only for
// a whole batch: a partial one waits for the batch in flight, which keeps batches
// large when results arrive faster than one statement stores them (several small
// statements at once cost the database more per result than one large one). Each
// caller gets its own answer, fenced by its own lease epoch: a stale or refused result
// in a batch fails only its caller. The zero value needs DB; it starts no goroutine of
// its own when idle.
type ResultBatcher struct {
	DB         DB
	MaxBatch   int
	MaxFlushes int

	mu       sync.Mutex
	queue    []*resultCall
	flushing int
	batches  atomic.Int64
	results  atomic.Int64
}

// resultCall is one caller's result waiting in a batch, and its answer.
type resultCall struct {
	ctx  context.Context
	in   ResultToStore
	out  StoredResult
	err  error
	done chan struct{}
}

func (c *resultCall) answer(out StoredResult, err error) {
	c.out, c.err = out, err
	close(c.done)
}

// Store records one result and returns what StoreCommandResult would: the stored
// result, a replay of one stored at the same epoch, ErrNotHeld saying why it is
// refused, ErrNotFound, or a *domain.InputError for a result the database refuses.
func (b *ResultBatcher) Store(ctx context.Context, in ResultToStore) (StoredResult, error) {
	call := &resultCall{ctx: ctx, in: in, done: make(chan struct{})}
	b.mu.Lock()
	b.queue = append(b.queue, call)
	start := b.flushing == 0 || (b.flushing < b.maxFlushes() && len(b.queue) >= b.maxBatch())
	if start {
		b.flushing++
	}
	b.mu.Unlock()
	if start {
		go b.flushLoop()
	}
	select {
	case <-call.done:
		return call.out, call.err
	case <-ctx.Done():
		return StoredResult{}, fmt.Errorf("storing result of %s: %w", in.Command, ctx.Err())
	}
}

func (b *ResultBatcher) maxFlushes() int {
	if b.MaxFlushes > 0 {
		return b.MaxFlushes
	}
	return DefaultResultFlushes
}

func (b *ResultBatcher) maxBatch() int {
	if b.MaxBatch > 0 {
		return b.MaxBatch
	}
	return DefaultResultBatchMax
}

// flushLoop writes batches until the queue is empty.
func (b *ResultBatcher) flushLoop() {
	for {
		batch := b.take()
		if batch == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), resultFlushTimeout)
		b.flush(ctx, batch)
		cancel()
	}
}

// take removes the next batch from the queue: up to MaxBatch calls whose callers still
// wait. With nothing left it gives up its flush and returns nil.
func (b *ResultBatcher) take() []*resultCall {
	b.mu.Lock()
	defer b.mu.Unlock()
	var batch []*resultCall
	n := 0
	for _, c := range b.queue {
		n++
		if c.ctx.Err() != nil {
			c.answer(StoredResult{}, fmt.Errorf("storing result of %s: %w", c.in.Command, c.ctx.Err()))
			continue
		}
		batch = append(batch, c)
		if len(batch) == b.maxBatch() {
			break
		}
	}
	b.queue = b.queue[n:]
	if len(batch) == 0 {
		b.flushing--
		return nil
	}
	return batch
}

// flush stores a batch and answers each call.
func (b *ResultBatcher) flush(ctx context.Context, batch []*resultCall) {
	in := make([]ResultToStore, len(batch))
	for i, c := range batch {
		in[i] = c.in
	}
	b.batches.Add(1)
	b.results.Add(int64(len(batch)))
	storeResults(ctx, b.DB, in, func(i int, out StoredResult, err error) { batch[i].answer(out, err) })
}

// Stats returns how many batches the batcher wrote and how many results they held.
func (b *ResultBatcher) Stats() (batches, results int64) {
	return b.batches.Load(), b.results.Load()
}

// ResultAnswer is what storing one result of a batch gave: as StoreCommandResult
// returns.
type ResultAnswer struct {
	Stored StoredResult
	Err    error
}

// StoreCommandResults stores a batch of results in one statement, one transaction,
// and answers each as StoreCommandResult would, in order: each is fenced by its own
// lease epoch, and one refused (a stale epoch, a value the database will not take)
// does not fail the others. A command named twice is stored once; the second is
// answered as a replay or refused.
func StoreCommandResults(ctx context.Context, db DB, in []ResultToStore) []ResultAnswer {
	out := make([]ResultAnswer, len(in))
	storeResults(ctx, db, in, func(i int, s StoredResult, err error) { out[i] = ResultAnswer{Stored: s, Err: err} })
	return out
}

// storeResults stores in and calls answer once per result, the stored ones first. When
// the database refuses the batch (a value it will not take, a deadlock), each result is
// stored alone instead, so that only the one at fault fails.
func storeResults(ctx context.Context, db DB, in []ResultToStore, answer func(int, StoredResult, error)) {
	first := make(map[uuid.UUID]bool, len(in))
	var batch, later []int
	for i, r := range in {
		if first[r.Command] {
			later = append(later, i)
			continue
		}
		first[r.Command] = true
		batch = append(batch, i)
	}
	stored, err := storeBatch(ctx, db, in, batch)
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr):
		for i := range in {
			s, err := storeAlone(ctx, db, in[i])
			answer(i, s, err)
		}
		return
	case err != nil:
		for i := range in {
			answer(i, StoredResult{}, err)
		}
		return
	}
	for _, i := range batch {
		row, ok := stored[in[i].Command]
		if !ok {
			later = append(later, i)
			continue
		}
		s := StoredResult{CommandID: in[i].Command, Status: resultStatus(in[i].Result)}
		s.DeploymentID, s.StepPosition, s.Target = row.DeploymentID, stepPosition(row.StepPosition), row.Name
		answer(i, s, nil)
	}
	// Those that stored nothing are told why, after the others have their answer.
	for _, i := range later {
		st, err := resultRefusal(ctx, db, in[i])
		if err != nil {
			answer(i, StoredResult{}, err)
			continue
		}
		answer(i, StoredResult{CommandID: in[i].Command, Status: st, Replayed: true}, nil)
	}
}

// storeBatch runs StoreCommandResults for the results of in at the indexes of batch
// (each command once) and returns the rows stored by command id.
func storeBatch(ctx context.Context, db DB, in []ResultToStore, batch []int) (map[uuid.UUID]dbsqlc.CommandResultRow, error) {
	p := dbsqlc.StoreCommandResultsParams{MaxAnalysisInput: MaxAnalysisInput}
	for _, i := range batch {
		r, t := in[i].Result, storedText(in[i].Result)
		errText := ""
		if t.errText != nil {
			errText = *t.errText
		}
		p.CommandIds = append(p.CommandIds, in[i].Command)
		p.LeaseEpochs = append(p.LeaseEpochs, in[i].Epoch)
		p.Statuses = append(p.Statuses, resultStatus(r))
		p.ExitCodes = append(p.ExitCodes, int64(r.ExitCode))
		p.Outputs = append(p.Outputs, t.display)
		p.OutputsTruncated = append(p.OutputsTruncated, t.truncated)
		p.Errors = append(p.Errors, errText)
		p.StartedAt = append(p.StartedAt, r.StartedAt.UTC())
		p.FinishedAt = append(p.FinishedAt, r.FinishedAt.UTC())
		p.OutputsRaw = append(p.OutputsRaw, t.raw)
		p.InstanceIds = append(p.InstanceIds, in[i].Instance)
		p.Targets = append(p.Targets, in[i].Target)
		p.OutputTails = append(p.OutputTails, t.tail)
		p.AnalysisInputs = append(p.AnalysisInputs, t.analysis)
	}
	// One statement is one transaction: the results, their events and analysis
	// requests commit together, in one round trip.
	rows, err := queries.StoreCommandResults(ctx, db, p)
	if err != nil {
		return nil, fmt.Errorf("storing a batch of %d results: %w", len(batch), err)
	}
	stored := make(map[uuid.UUID]dbsqlc.CommandResultRow, len(rows))
	for _, r := range rows {
		stored[r.ID] = r
	}
	return stored, nil
}

// storeAlone stores one result of a batch the database refused, by itself. A value the
// database will not take (SQLSTATE class 22, data exception) is the caller's
// *domain.InputError.
func storeAlone(ctx context.Context, db DB, in ResultToStore) (StoredResult, error) {
	if int64(int32(in.Result.ExitCode)) != int64(in.Result.ExitCode) {
		return StoredResult{}, domain.Invalid("result of "+in.Command.String(), fmt.Sprintf("exit code %d is out of range", in.Result.ExitCode))
	}
	out, err := StoreCommandResult(ctx, db, in)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, dataExceptionClass) {
		return StoredResult{}, domain.Invalid("result of "+in.Command.String(), "the database refused it: "+pgErr.Message)
	}
	return out, err
}

// resultStatus is the status a result gives its command.
func resultStatus(r CommandResult) string {
	if r.Succeeded() {
		return domain.CommandSucceeded
	}
	return domain.CommandFailed
}

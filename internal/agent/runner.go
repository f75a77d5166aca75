package agent

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/mantis-deploy/mantis/internal/agent/journal"
	"github.com/mantis-deploy/mantis/internal/config"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

var (
	// ErrBusy is returned by Run when exec.max_concurrent commands are running.
	ErrBusy = errors.New("agent busy: every run slot is taken")
	// ErrStopping is returned once Shutdown has begun.
	ErrStopping = errors.New("agent stopping: no new commands")
)

// commandKeyPrefix starts the run key of a command that carries no dispatch
// request id (from a Mandible older than the field): its own id stands in.
const commandKeyPrefix = "command-"

// Runner runs commands on this host, each as `shell -c command` in a process
// group of its own, at most exec.max_concurrent at once, and each dispatch
// request at most once: its runs are keyed on the dispatch request id and
// recorded in a Journal, so a redelivery of a request joins the run under
// way or gets the stored result, even across restarts.
type Runner struct {
	cfg     config.Exec
	journal *journal.Journal
	logger  *slog.Logger
	// slots holds one token per running (or reserved) command.
	slots chan struct{}
	// noRequestID logs, once, that commands come without a request id.
	noRequestID sync.Once
	// metrics counts every run's result; nil counts nothing.
	metrics *Metrics
	// output receives the live output of the runs this runner starts; nil streams
	// none (the result still carries the output's tail).
	output OutputSink
	// passEnv names the variables of the agent's environment commands get.
	passEnv map[string]bool

	mu       sync.Mutex
	flights  map[string]*flight    // by run key: the runs under way
	running  map[string]*execution // by command id, every delivery of a run under way
	stopping bool
	wg       sync.WaitGroup // one per entry of flights
}

// flight is one run of a dispatch request, which every delivery of the
// request waits on.
type flight struct {
	key  string
	ex   *execution
	ids  []string // the command ids that delivered it, keys of Runner.running
	done chan struct{}
	res  *mantisv1.CommandResult // set before done closes
}

// RunHandle is a caller's handle on the run of its command's dispatch request: one
// it started, one under way it joined, or one that finished before.
type RunHandle struct {
	f       *flight
	started bool
}

// Started reports whether this call started the command's process; false
// means the request had run, or was running, already.
func (run *RunHandle) Started() bool { return run.started }

// Wait returns the run's result once it is over, or ctx's error first.
// Giving up waiting does not stop the run.
func (run *RunHandle) Wait(ctx context.Context) (*mantisv1.CommandResult, error) {
	select {
	case <-run.f.done:
		return proto.CloneOf(run.f.res), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// NewRunner returns a Runner bounded by cfg, which must be valid, that
// records its runs in runs.
func NewRunner(cfg config.Exec, runs *journal.Journal, logger *slog.Logger) *Runner {
	return &Runner{
		cfg:     cfg,
		journal: runs,
		logger:  logger,
		slots:   make(chan struct{}, cfg.MaxConcurrent),
		passEnv: passedEnv(cfg.PassEnv),
		flights: map[string]*flight{},
		running: map[string]*execution{},
	}
}

// Start starts the run of cmd's dispatch request on a free slot, or joins the
// run of that request under way, or returns its stored result, without
// waiting. It fails at once, without running anything, with an
// *InvalidCommandError, ErrBusy, ErrStopping or an ErrJournalUnavailable. ctx
// governs the process it starts: cancelling it kills the process group.
func (r *Runner) Start(ctx context.Context, cmd *mantisv1.Command) (*RunHandle, error) {
	if err := ValidateCommand(cmd); err != nil {
		return nil, err
	}
	return r.begin(ctx, cmd, true)
}

// Run runs cmd as Start does and returns the result once the run is over.
// When it started the process, cancelling ctx kills the process group and the
// result says cancelled; when it joined a run, it stops waiting with ctx's
// error.
func (r *Runner) Run(ctx context.Context, cmd *mantisv1.Command) (*mantisv1.CommandResult, error) {
	run, err := r.Start(ctx, cmd)
	if err != nil {
		return nil, err
	}
	if run.started {
		return run.Wait(context.WithoutCancel(ctx))
	}
	return run.Wait(ctx)
}

// startHeld is Start on a slot the caller holds; cmd must be valid.
func (r *Runner) startHeld(ctx context.Context, cmd *mantisv1.Command) (*RunHandle, error) {
	return r.begin(ctx, cmd, false)
}

// begin joins, answers from the journal, or starts the run of cmd's request.
// Journaling the start and registering the run happen under one lock, so
// two deliveries of a request never both start it.
func (r *Runner) begin(ctx context.Context, cmd *mantisv1.Command, takeSlot bool) (*RunHandle, error) {
	key := r.runKey(ctx, cmd)
	r.mu.Lock()
	defer r.mu.Unlock()
	if f := r.flights[key]; f != nil {
		r.attachLocked(ctx, f, cmd)
		return &RunHandle{f: f}, nil
	}
	if res, ok := r.journal.Lookup(key); ok {
		r.logger.InfoContext(ctx, "request ran already: returning its result", "command_id", cmd.GetId(), "run_key", key)
		f := &flight{key: key, done: make(chan struct{}), res: res}
		close(f.done)
		return &RunHandle{f: f}, nil
	}
	if r.stopping {
		return nil, ErrStopping
	}
	if takeSlot {
		select {
		case r.slots <- struct{}{}:
		default:
			return nil, ErrBusy
		}
	}
	if err := r.journal.Begin(key, cmd); err != nil {
		if takeSlot {
			r.release(1)
		}
		return nil, err
	}
	f := &flight{key: key, ex: &execution{stop: make(chan struct{})}, ids: []string{cmd.GetId()}, done: make(chan struct{})}
	r.flights[key] = f
	r.running[cmd.GetId()] = f.ex
	r.wg.Add(1)
	go r.fly(ctx, cmd, f, takeSlot)
	return &RunHandle{f: f, started: true}, nil
}

// attachLocked makes cmd another delivery of the run f under way: it waits
// for f's result, is cancelled with it, and is owed the result too.
func (r *Runner) attachLocked(ctx context.Context, f *flight, cmd *mantisv1.Command) {
	r.logger.InfoContext(ctx, "request is running already: joining its run",
		"command_id", cmd.GetId(), "run_key", f.key, "running_command_id", f.ids[0])
	if !slices.Contains(f.ids, cmd.GetId()) {
		f.ids = append(f.ids, cmd.GetId())
		r.running[cmd.GetId()] = f.ex
	}
	if err := r.journal.Attach(f.key, cmd); err != nil {
		// The run goes on and its result reaches this caller; only a restart
		// before it is reported would lose the link to this command.
		r.logger.WarnContext(ctx, "journaling a joined delivery failed", "command_id", cmd.GetId(), "err", err)
	}
}

// fly runs f's process, journals its result and hands it to every delivery.
func (r *Runner) fly(ctx context.Context, cmd *mantisv1.Command, f *flight, slot bool) {
	defer r.wg.Done()
	ctx, span := startRunSpan(ctx, cmd)
	res := r.execute(ctx, cmd, f.ex)
	endRunSpan(span, res)
	if err := r.journal.Finish(f.key, res); err != nil {
		r.logger.ErrorContext(ctx, "journaling a result failed: a restart before it is reported would fail the run",
			"command_id", cmd.GetId(), "err", err)
	}
	r.logFinished(ctx, cmd, res)
	r.metrics.finished(res)
	if slot {
		r.release(1) // before the result is out, so its caller finds the slot free
	}
	r.mu.Lock()
	delete(r.flights, f.key)
	for _, id := range f.ids {
		delete(r.running, id)
	}
	f.res = res
	close(f.done)
	r.mu.Unlock()
}

// runKey is the idempotency key of cmd's run: its dispatch request id, or
// its own id when it carries none.
func (r *Runner) runKey(ctx context.Context, cmd *mantisv1.Command) string {
	if id := cmd.GetDispatchRequestId(); id != "" {
		return id
	}
	r.noRequestID.Do(func() {
		r.logger.WarnContext(ctx, "command carries no dispatch_request_id, as from an older mandible: "+
			"runs are keyed on command ids, so a redelivered request may run again", "command_id", cmd.GetId())
	})
	return commandKeyPrefix + cmd.GetId()
}

// Free returns how many commands could start now.
func (r *Runner) Free() int { return cap(r.slots) - len(r.slots) }

// acquire reserves between one and max run slots, waiting for the first; the
// caller runs a command on each with startHeld and gives back the rest.
func (r *Runner) acquire(ctx context.Context, max int) (int, error) {
	select {
	case r.slots <- struct{}{}:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	n := 1
	for n < max {
		select {
		case r.slots <- struct{}{}:
			n++
		default:
			return n, nil
		}
	}
	return n, nil
}

// release gives back n slots taken by acquire.
func (r *Runner) release(n int) {
	for range n {
		<-r.slots
	}
}

// Cancel kills the process group of the run that the command id delivered;
// the run returns with cancelled set, to each of its deliveries. It reports
// whether such a run was under way.
func (r *Runner) Cancel(id string) bool {
	r.mu.Lock()
	ex, ok := r.running[id]
	r.mu.Unlock()
	if ok {
		ex.kill("")
	}
	return ok
}

// Shutdown refuses new runs, waits for the running ones until ctx is done,
// then kills the process groups of those left and waits for their runs to
// return. It returns how many it killed.
func (r *Runner) Shutdown(ctx context.Context) int {
	r.mu.Lock()
	r.stopping = true
	r.mu.Unlock()
	done := make(chan struct{})
	go func() {
		r.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return 0
	case <-ctx.Done():
	}
	r.mu.Lock()
	left := make([]*execution, 0, len(r.flights))
	for _, f := range r.flights {
		left = append(left, f.ex)
	}
	r.mu.Unlock()
	for _, ex := range left {
		ex.kill("agent stopping: killed after exec.stop_timeout")
	}
	<-done
	return len(left)
}

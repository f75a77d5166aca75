package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mantis-deploy/mantis/internal/config"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

var (
	// ErrBusy is returned by Run when exec.max_concurrent commands are running.
	ErrBusy = errors.New("agent busy: every run slot is taken")
	// ErrStopping is returned once Shutdown has begun.
	ErrStopping = errors.New("agent stopping: no new commands")
	// ErrAlreadyRunning is returned for a command whose id is running already.
	ErrAlreadyRunning = errors.New("a command with this id is running already")
)

// outputDrainTimeout bounds the wait for the last output once every process
// of the group is gone: only a process that left the group (setsid) and kept
// the output pipe can hold it longer, and it is not waited for.
const outputDrainTimeout = time.Second

// Runner runs commands on this host, each as `shell -c command` in a process
// group of its own, at most exec.max_concurrent at once.
type Runner struct {
	cfg    config.Exec
	logger *slog.Logger
	// slots holds one token per running (or reserved) command.
	slots chan struct{}

	mu       sync.Mutex
	running  map[string]*execution
	stopping bool
	wg       sync.WaitGroup // one per entry of running
}

// execution is the handle Cancel and Shutdown use on a running command.
type execution struct {
	stop   chan struct{} // closed to kill the command's process group
	once   sync.Once
	reason string // why it was stopped, "" for Cancel; set before stop closes
}

func (e *execution) kill(reason string) {
	e.once.Do(func() {
		e.reason = reason
		close(e.stop)
	})
}

// NewRunner returns a Runner bounded by cfg, which must be valid.
func NewRunner(cfg config.Exec, logger *slog.Logger) *Runner {
	return &Runner{
		cfg:     cfg,
		logger:  logger,
		slots:   make(chan struct{}, cfg.MaxConcurrent),
		running: map[string]*execution{},
	}
}

// Run runs cmd to completion, timeout or cancellation and returns its result.
// It fails at once, without running anything, with an *InvalidCommandError,
// ErrBusy, ErrAlreadyRunning or ErrStopping. Cancelling ctx kills the
// command's process group and the result says cancelled.
func (r *Runner) Run(ctx context.Context, cmd *mantisv1.Command) (*mantisv1.CommandResult, error) {
	if err := ValidateCommand(cmd); err != nil {
		return nil, err
	}
	select {
	case r.slots <- struct{}{}:
	default:
		return nil, ErrBusy
	}
	defer r.release(1)
	return r.runHeld(ctx, cmd)
}

// Free returns how many commands could start now.
func (r *Runner) Free() int { return cap(r.slots) - len(r.slots) }

// acquire reserves between one and max run slots, waiting for the first; the
// caller runs a command on each with runHeld and gives back the rest.
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

// Cancel kills the process group of the running command id; its run returns
// with cancelled set. It reports whether such a command was running.
func (r *Runner) Cancel(id string) bool {
	r.mu.Lock()
	ex, ok := r.running[id]
	r.mu.Unlock()
	if ok {
		ex.kill("")
	}
	return ok
}

// Shutdown refuses new commands, waits for the running ones until ctx is
// done, then kills the process groups of those left and waits for their runs
// to return. It returns how many it killed.
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
	left := slices.Collect(maps.Values(r.running))
	r.mu.Unlock()
	for _, ex := range left {
		ex.kill("agent stopping: killed after exec.stop_timeout")
	}
	<-done
	return len(left)
}

// runHeld runs cmd on a slot the caller holds.
func (r *Runner) runHeld(ctx context.Context, cmd *mantisv1.Command) (*mantisv1.CommandResult, error) {
	ex := &execution{stop: make(chan struct{})}
	r.mu.Lock()
	switch {
	case r.stopping:
		r.mu.Unlock()
		return nil, ErrStopping
	case r.running[cmd.GetId()] != nil:
		r.mu.Unlock()
		return nil, ErrAlreadyRunning
	}
	r.running[cmd.GetId()] = ex
	r.wg.Add(1)
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.running, cmd.GetId())
		r.mu.Unlock()
		r.wg.Done()
	}()
	return r.execute(ctx, cmd, ex), nil
}

// execute runs one command and always returns a result.
func (r *Runner) execute(ctx context.Context, cmd *mantisv1.Command, ex *execution) *mantisv1.CommandResult {
	timeout := r.cfg.DefaultTimeout.Duration
	if cmd.GetTimeout() != nil {
		timeout = cmd.GetTimeout().AsDuration()
	}
	dir := cmd.GetWorkingDir()
	if dir == "" {
		dir = r.cfg.WorkingDir
	}
	logger := r.logger.With("command_id", cmd.GetId())
	res := &mantisv1.CommandResult{ExitCode: -1, StartedAt: timestamppb.Now()}
	finish := func() *mantisv1.CommandResult {
		res.FinishedAt = timestamppb.Now()
		logger.InfoContext(ctx, "command finished",
			"exit_code", res.ExitCode,
			"duration", res.FinishedAt.AsTime().Sub(res.StartedAt.AsTime()),
			"timed_out", res.TimedOut,
			"cancelled", res.Cancelled,
			"output_bytes", len(res.Output),
			"output_truncated", res.OutputTruncated,
			"error", res.Error)
		return res
	}

	if dir != "" {
		// Checked here because a failed chdir in the child reads as the
		// shell not existing.
		if _, err := os.Stat(dir); err != nil {
			if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
				err = pe.Err
			}
			res.Error = fmt.Sprintf("working directory %s: %v", dir, err)
			return finish()
		}
	}

	// A pipe of our own rather than an io.Writer: os/exec would then wait for
	// every holder of the pipe, background children included, before Wait
	// returned, and a timeout could not fire while it waited.
	pr, pw, err := os.Pipe()
	if err != nil {
		res.Error = fmt.Sprintf("creating output pipe: %v", err)
		return finish()
	}
	defer pr.Close()
	c := exec.Command(r.cfg.Shell, "-c", cmd.GetCommand())
	c.Dir = dir
	c.Env = environ(cmd.GetEnv())
	c.Stdout, c.Stderr = pw, pw
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = c.Start()
	pw.Close()
	if err != nil {
		res.Error = fmt.Sprintf("starting %s: %v", r.cfg.Shell, err)
		return finish()
	}
	logger.DebugContext(ctx, "command started", "pid", c.Process.Pid, "timeout", timeout)

	out := newTailBuffer(r.cfg.OutputLimitBytes)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		_, _ = io.Copy(out, pr)
	}()
	exited := make(chan struct{})
	var waitErr error
	go func() {
		defer close(exited)
		waitErr = c.Wait()
	}()

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	kill := true
	select {
	case <-exited:
		kill = false
	case <-timer.C:
		res.TimedOut = true
		res.Error = fmt.Sprintf("timed out after %s", timeout)
	case <-ctx.Done():
		res.Cancelled = true
		res.Error = fmt.Sprintf("run abandoned by its caller: %v", context.Cause(ctx))
	case <-ex.stop:
		res.Cancelled = true
		res.Error = ex.reason
	}
	r.reap(ctx, logger, c.Process, kill, exited, readDone, pr)
	res.Output, res.OutputTruncated = out.Tail()

	if !kill {
		state := c.ProcessState
		var ws syscall.WaitStatus
		if state != nil {
			ws, _ = state.Sys().(syscall.WaitStatus)
		}
		switch {
		case state == nil:
			res.Error = fmt.Sprintf("waiting for %s: %v", r.cfg.Shell, waitErr)
		case state.Exited():
			res.ExitCode = int32(state.ExitCode())
		case ws.Signaled():
			// Killed from outside the agent (the OOM killer, an operator):
			// it did not exit on its own, so the exit code stays -1.
			res.Error = "terminated by signal: " + ws.Signal().String()
		default:
			res.Error = fmt.Sprintf("waiting for %s: %v", r.cfg.Shell, waitErr)
		}
	}
	return finish()
}

// reap makes sure no process of the command's group is left. With kill set
// (timeout, cancel) it signals the group at once; otherwise the shell has
// exited and only processes it left behind, if any, are signalled. SIGTERM
// first, SIGKILL once exec.kill_grace has passed or everything is gone.
func (r *Runner) reap(ctx context.Context, logger *slog.Logger, proc *os.Process, kill bool, exited, readDone <-chan struct{}, pr *os.File) {
	pgid := proc.Pid // Setpgid: the shell leads a group of its own pid
	if !kill {
		if groupGone(pgid) {
			r.drain(readDone, pr)
			return
		}
		logger.InfoContext(ctx, "killing processes left behind by command")
	}
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	awaitGroupExit(pgid, exited, readDone, r.cfg.KillGrace.Duration)
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	_ = proc.Kill() // the shell itself, should it have left its group
	<-exited
	r.drain(readDone, pr)
}

// groupExitPoll is how often a terminating process group is checked for
// being gone.
const groupExitPoll = 20 * time.Millisecond

// awaitGroupExit waits until the shell has exited, the output pipe is closed
// and no process of the group pgid is left, or until grace has passed.
// Orphans nobody reaps (a container whose PID 1 does not) stay in the group
// as zombies, so there the whole grace passes; it costs time, not safety.
func awaitGroupExit(pgid int, exited, readDone <-chan struct{}, grace time.Duration) {
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	tick := time.NewTicker(groupExitPoll)
	defer tick.Stop()
	for {
		if closed(exited) && closed(readDone) && groupGone(pgid) {
			return
		}
		select {
		case <-deadline.C:
			return
		case <-tick.C:
		}
	}
}

// groupGone reports whether no process of the group pgid exists.
func groupGone(pgid int) bool {
	return errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH)
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// drain waits briefly for the output reader to see end of file, then closes
// the pipe under it.
func (r *Runner) drain(readDone <-chan struct{}, pr *os.File) {
	t := time.NewTimer(outputDrainTimeout)
	defer t.Stop()
	select {
	case <-readDone:
	case <-t.C:
		pr.Close()
		<-readDone
	}
}

// environ is the agent's environment with extra added, extra winning.
func environ(extra map[string]string) []string {
	env := os.Environ()
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		env = append(env, k+"="+extra[k])
	}
	return env
}

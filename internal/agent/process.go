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
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mantis-deploy/mantis/internal/secretenv"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

// outputDrainTimeout bounds the wait for the last output once every process
// of the group is gone: only a process that left the group (setsid) and kept
// the output pipe can hold it longer, and it is not waited for.
const outputDrainTimeout = time.Second

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
		res.Error = boundError(res.Error)
		return res
	}

	if problem := checkWorkingDir(dir); problem != "" {
		res.Error = problem
		return finish()
	}
	c, pr, problem := r.start(cmd, dir)
	if problem != "" {
		res.Error = problem
		return finish()
	}
	defer pr.Close()
	logger.DebugContext(ctx, "command started", "pid", c.Process.Pid, "timeout", timeout)

	out := newTailBuffer(r.cfg.OutputLimitBytes)
	var sink io.Writer = out
	if r.output != nil {
		live := newLiveStream(cmd, r.output)
		defer live.close() // once the output is read to its end (reap drains it)
		sink = io.MultiWriter(out, live)
	}
	// Secrets are masked here, where output first exists: the result, the journal,
	// the live stream and whatever reads them later see only the mask.
	masker := commandMasker(ctx, logger, cmd, sink)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		_, _ = io.Copy(masker, pr)
	}()
	exited := make(chan struct{})
	var waitErr error
	go func() {
		defer close(exited)
		waitErr = c.Wait()
	}()

	kill := awaitEnd(ctx, ex, timeout, exited, res)
	r.reap(ctx, logger, c.Process, kill, exited, readDone, pr)
	_ = masker.Flush() // into the tail buffer and the live stream, neither of which fails
	res.Output, res.OutputTruncated = out.Tail()
	if !kill {
		r.recordExit(res, c.ProcessState, waitErr)
	}
	return finish()
}

// commandMasker returns the writer that masks cmd's secret env values in the output it
// passes to sink, and logs the names of those too short to mask.
func commandMasker(ctx context.Context, logger *slog.Logger, cmd *mantisv1.Command, sink io.Writer) *secretMasker {
	values, short := secretValues(cmd)
	for _, name := range short {
		logger.WarnContext(ctx, "secret env value too short to mask in output", "env_name", name, "min_bytes", secretenv.MinMaskBytes)
	}
	return newSecretMasker(sink, values)
}

// checkWorkingDir returns why dir cannot be the command's working directory, or ""
// when it can (or is unset). It is checked before the start because a failed chdir in
// the child reads as the shell not existing.
func checkWorkingDir(dir string) string {
	if dir == "" {
		return ""
	}
	if _, err := os.Stat(dir); err != nil {
		if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Sprintf("working directory %s: %v", dir, err)
	}
	return ""
}

// start starts the command's shell in a process group of its own, writing its
// output to a pipe whose read end it returns, or returns why it could not start.
func (r *Runner) start(cmd *mantisv1.Command, dir string) (*exec.Cmd, *os.File, string) {
	// A pipe of our own rather than an io.Writer: os/exec would then wait for
	// every holder of the pipe, background children included, before Wait
	// returned, and a timeout could not fire while it waited.
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Sprintf("creating output pipe: %v", err)
	}
	c := exec.Command(r.cfg.Shell, "-c", cmd.GetCommand())
	c.Dir = dir
	c.Env = append(environ(r.passEnv, cmd.GetEnv()), commandIdentity(cmd)...)
	c.Stdout, c.Stderr = pw, pw
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = c.Start()
	pw.Close()
	if err != nil {
		pr.Close()
		return nil, nil, fmt.Sprintf("starting %s: %v", r.cfg.Shell, err)
	}
	return c, pr, ""
}

// awaitEnd waits for the command to exit, time out, be abandoned by ctx or be
// stopped through ex, records a timeout or a cancel in res, and reports whether the
// command's process group must be killed (it did not exit by itself).
func awaitEnd(ctx context.Context, ex *execution, timeout time.Duration, exited <-chan struct{}, res *mantisv1.CommandResult) (kill bool) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-exited:
		return false
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
	return true
}

// recordExit records how a shell that exited by itself ended: its exit code, or
// the signal that killed it from outside the agent.
func (r *Runner) recordExit(res *mantisv1.CommandResult, state *os.ProcessState, waitErr error) {
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

// The variables that tell a command which dispatch it is part of. The dispatch request
// id is the one a redelivery keeps; the command id changes with each delivery.
const (
	EnvDispatchRequestID = "MANTIS_DISPATCH_REQUEST_ID"
	EnvCommandID         = "MANTIS_COMMAND_ID"
	EnvTarget            = "MANTIS_TARGET"
)

// commandIdentity is the command's ids as environment entries; they come after the
// step's own env, so a step cannot mask them.
func commandIdentity(cmd *mantisv1.Command) []string {
	return []string{
		EnvDispatchRequestID + "=" + cmd.GetDispatchRequestId(),
		EnvCommandID + "=" + cmd.GetId(),
		EnvTarget + "=" + cmd.GetTarget(),
	}
}

// baseEnv names the variables of the agent's own environment that every command
// gets, as the agent has them; LC_* variables (localePrefix) too. Anything else
// must be named in exec.pass_env: the agent's env file, its OTEL_* exporter headers
// and its MANTIS_* settings stay the agent's.
var baseEnv = []string{"PATH", "HOME", "LANG", "TZ", "USER", "LOGNAME", "SHELL", "TMPDIR"}

// localePrefix starts the locale variables every command gets.
const localePrefix = "LC_"

// passedEnv returns the set of names of the agent's environment that reach a
// command: baseEnv and the names exec.pass_env adds.
func passedEnv(passEnv []string) map[string]bool {
	names := make(map[string]bool, len(baseEnv)+len(passEnv))
	for _, n := range baseEnv {
		names[n] = true
	}
	for _, n := range passEnv {
		names[n] = true
	}
	return names
}

// environ is the part of the agent's environment that passes, with extra added,
// extra winning.
func environ(passed map[string]bool, extra map[string]string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if passed[name] || strings.HasPrefix(name, localePrefix) {
			env = append(env, kv)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		env = append(env, k+"="+extra[k])
	}
	return env
}

// logFinished logs a run's result. It is called once the result is journaled, so
// that "command finished" in the log means a restart will report it, not run it.
func (r *Runner) logFinished(ctx context.Context, cmd *mantisv1.Command, res *mantisv1.CommandResult) {
	r.logger.InfoContext(ctx, "command finished",
		"command_id", cmd.GetId(),
		"exit_code", res.GetExitCode(),
		"duration", res.GetFinishedAt().AsTime().Sub(res.GetStartedAt().AsTime()),
		"timed_out", res.GetTimedOut(),
		"cancelled", res.GetCancelled(),
		"output_bytes", len(res.GetOutput()),
		"output_truncated", res.GetOutputTruncated(),
		"err", res.GetError())
}

package devstack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// process is one supervised child: it runs in its own process group, receives SIGKILL
// if the supervisor dies, and is stopped by signalling its group.
type process struct {
	name    string
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
	logFile *os.File
	stopSig syscall.Signal
	// server marks the backing servers (PostgreSQL, RabbitMQ, Temporal), stopped
	// after Mantis's own processes.
	server bool
}

// processSpec describes how to start a child.
type processSpec struct {
	Name string
	Path string
	Args []string
	Env  []string // appended to the supervisor's environment
	Dir  string
	// RunAs names an unprivileged user to drop to (through setpriv) when the
	// supervisor runs as root; empty runs as the supervisor's user.
	RunAs   string
	LogPath string
	// StopSignal asks the child to shut down cleanly (SIGTERM when zero).
	StopSignal syscall.Signal
}

func startProcess(logger *slog.Logger, spec processSpec) (*process, error) {
	path, args := spec.Path, spec.Args
	if spec.RunAs != "" && os.Geteuid() == 0 {
		// setpriv sets the parent-death signal after the uid change: the kernel clears one
		// set before it, and a server must not outlive its supervisor.
		args = append([]string{"--reuid", spec.RunAs, "--regid", spec.RunAs, "--init-groups",
			"--pdeathsig", "SIGTERM", "--", path}, args...)
		path = "setpriv"
	}
	cmd := exec.Command(path, args...)
	cmd.Dir = spec.Dir
	cmd.Env = append(os.Environ(), spec.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	logFile, err := os.OpenFile(spec.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening log for %s: %w", spec.Name, err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s (%s): %w", spec.Name, spec.Path, err)
	}
	p := &process{name: spec.Name, cmd: cmd, done: make(chan struct{}), logFile: logFile, stopSig: spec.StopSignal, server: true}
	if p.stopSig == 0 {
		p.stopSig = syscall.SIGTERM
	}
	logger.Debug("started process", "name", spec.Name, "pid", cmd.Process.Pid, "log", spec.LogPath)
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the child has ended.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop signals the child's group and waits up to grace before killing the group.
func (p *process) stop(grace time.Duration) error {
	if p.exited() {
		p.killGroup() // helpers a server forked may outlive it
		return nil
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, p.stopSig)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.killGroup()
		<-p.done
		return fmt.Errorf("%s did not stop within %s: killed", p.name, grace)
	}
	p.killGroup()
	return nil
}

func (p *process) killGroup() { _ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) }

// tail returns the last bytes of a log file, for error messages.
func tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		_, _ = f.Seek(-n, io.SeekEnd)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

// waitFor polls check until it succeeds, the child exits, or the timeout passes.
func waitFor(ctx context.Context, p *process, timeout time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		if p != nil && p.exited() {
			return fmt.Errorf("%s exited during start-up (%v); log tail:\n%s", p.name, p.waitErr, tail(p.logFile.Name(), 4000))
		}
		if last = check(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			if p != nil {
				return fmt.Errorf("%s not ready after %s: %w; log tail:\n%s", p.name, timeout, last, tail(p.logFile.Name(), 4000))
			}
			return fmt.Errorf("not ready after %s: %w", timeout, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// runAs runs a short command, as user when the supervisor is root, and returns its
// combined output in the error when it fails.
func runAs(ctx context.Context, usr string, env []string, path string, args ...string) (string, error) {
	if usr != "" && os.Geteuid() == 0 {
		args = append([]string{"--reuid", usr, "--regid", usr, "--init-groups", "--", path}, args...)
		path = "setpriv"
	}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %v: %w: %s", filepath.Base(path), args, err, out)
	}
	return string(out), nil
}

// chownTo gives path (recursively) to usr when the supervisor is root.
func chownTo(path, usr string) error {
	if usr == "" || os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup(usr)
	if err != nil {
		return fmt.Errorf("looking up user %s: %w", usr, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return filepath.WalkDir(path, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

// reachableBy reports whether usr can traverse into dir; servers that drop privileges
// cannot use a data directory under, say, a mode-0700 home.
func reachableBy(ctx context.Context, usr, dir string) bool {
	if usr == "" || os.Geteuid() != 0 {
		return true
	}
	_, err := runAs(ctx, usr, nil, "test", "-x", dir)
	return err == nil
}

var errNotFound = errors.New("not found")

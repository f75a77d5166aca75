package fleet

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Host is one machine of the rig: a network namespace with an address, a host
// name, its own /etc entries and private directories.
type Host struct {
	rig   *Rig
	name  string
	ns    string
	addr  netip.Addr
	root  string
	port  string
	etc   []string
	binds []bind
}

type bind struct{ from, to string }

// Name is the host's name, also its host name inside.
func (h *Host) Name() string { return h.name }

// Namespace is the host's network namespace (ip netns).
func (h *Host) Namespace() string { return h.ns }

// Addr is the host's address on the rig's bridge.
func (h *Host) Addr() netip.Addr { return h.addr }

// Port is the host's link on the rig's bridge, in SwitchNamespace: taking it down
// (ip -n SWITCH link set PORT down) cuts the host off, as a partition would.
func (h *Host) Port() string { return h.port }

// Root is the host's directory on the machine: logs/ holds the output of what
// Start ran.
func (h *Host) Root() string { return h.root }

// Path returns where the file the host sees at path lies on the machine: under its
// /etc/netns directory or a private directory, or path itself.
func (h *Host) Path(path string) string {
	for _, b := range h.binds {
		if rest, ok := cutDir(path, b.to); ok {
			return filepath.Join(b.from, rest)
		}
	}
	for _, e := range h.etc {
		if rest, ok := cutDir(path, filepath.Join("/etc", e)); ok {
			return filepath.Join("/etc/netns", h.ns, e, rest)
		}
	}
	return path
}

func cutDir(path, dir string) (string, bool) {
	if path == dir {
		return "", true
	}
	rest, ok := strings.CutPrefix(path, dir+"/")
	return rest, ok
}

// hostScript sets the host name, binds the private directories and runs the command:
// sh -c hostScript sh NAME FROM TO ... -- COMMAND ARGS.
const hostScript = `hostname "$1" && shift
while [ "$1" != -- ]; do mount --bind "$1" "$2" || exit 125; shift 2; done
shift
exec "$@"`

// Argv returns the command line that runs argv on the host: in its network
// namespace (with its /etc entries), its host name and its private directories. The
// process is argv's own: each wrapper execs the next.
func (h *Host) Argv(argv ...string) []string {
	out := []string{"ip", "netns", "exec", h.ns, "unshare", "--mount", "--uts", "--propagation", "private",
		"--", "/bin/sh", "-c", hostScript, "sh", h.name}
	for _, b := range h.binds {
		out = append(out, b.from, b.to)
	}
	return append(append(out, "--"), argv...)
}

// Command returns an unstarted command that runs name with args on the host.
func (h *Host) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	argv := h.Argv(append([]string{name}, args...)...)
	return exec.CommandContext(ctx, argv[0], argv[1:]...)
}

// NetnsCommand returns an unstarted command in the host's network namespace only:
// it sees the machine's files and host name (servers a test runs beside the host's
// own view, say).
func (h *Host) NetnsCommand(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", h.ns, name}, args...)...)
}

// Exec runs name with args on the host and returns its combined output.
func (h *Host) Exec(ctx context.Context, name string, args ...string) ([]byte, error) {
	out, err := h.Command(ctx, name, args...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("%s on %s: %w: %s", name, h.name, err, out)
	}
	return out, nil
}

// Script returns a shell script that runs its arguments on the host, for a test's
// stand-ins (scp to this host, say).
func (h *Host) Script() string {
	var b strings.Builder
	b.WriteString("#!/bin/sh\nexec")
	for _, a := range h.Argv() {
		b.WriteString(" " + shellQuote(a))
	}
	b.WriteString(` "$@"` + "\n")
	return b.String()
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// Process is a background process of a host, stopped when the test ends.
type Process struct {
	Name    string
	LogPath string
	cmd     *exec.Cmd
	done    chan struct{}
	once    sync.Once
	err     error
}

// Start runs argv on the host in the background with env (and nothing of the
// test's environment), its output in logs/<name>.log; the test's end stops it with
// SIGTERM, then SIGKILL after 30 s, with what it started.
func (h *Host) Start(name string, env []string, argv ...string) (*Process, error) {
	logPath := filepath.Join(h.root, "logs", name+".log")
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	full := h.Argv(argv...)
	cmd := exec.Command(full[0], full[1:]...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s on %s: %w", name, h.name, err)
	}
	p := &Process{Name: name, LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	h.rig.t.Cleanup(func() { p.Stop(30 * time.Second) })
	return p, nil
}

// Pid is the process's id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is how the process ended, once Done is closed.
func (p *Process) Err() error { return p.err }

// Stop sends SIGTERM, waits up to grace, then kills the process group.
func (p *Process) Stop(grace time.Duration) {
	p.once.Do(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(grace):
		}
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	})
}

// Tail returns the last n lines of the process's log.
func (p *Process) Tail(n int) string {
	b, err := os.ReadFile(p.LogPath)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// errExited is a process that ended while it was awaited.
var errExited = errors.New("process exited")

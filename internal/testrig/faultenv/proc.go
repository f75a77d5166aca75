// Package faultenv is the fault suite's test harness: backing servers a test may stop,
// crash, freeze and restart (through internal/testrig/devstack), a TCP proxy that delays or cuts
// a link, a cluster of real Mandible, Thorax and agent processes, and a workload whose
// commands keep a ledger that proves nothing was lost or run twice.
package faultenv

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// procStopGrace bounds a process's clean shutdown before it is killed.
const procStopGrace = 30 * time.Second

// Proc is a Mantis process (Mandible, Thorax or agent) run from a config file, in a
// process group of its own, killed if the test binary dies. It can be started again
// with the same file, as a restart on the same host would.
type Proc struct {
	Name    string
	binary  string
	args    []string
	env     []string
	dir     string
	logPath string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// newProc describes a process; Start runs it.
func newProc(name, binary, dir, logPath string, args, env []string) *Proc {
	return &Proc{Name: name, binary: binary, args: args, env: env, dir: dir, logPath: logPath}
}

// Start runs the process (again). It must not be running.
func (p *Proc) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done != nil && !closed(p.done) {
		return fmt.Errorf("starting %s: already running", p.Name)
	}
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("opening log of %s: %w", p.Name, err)
	}
	cmd := exec.Command(p.binary, p.args...)
	cmd.Env = append(environWithoutMantis(), p.env...)
	cmd.Dir = p.dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("starting %s: %w", p.Name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(done)
	}()
	p.cmd, p.done = cmd, done
	return nil
}

func closed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Running reports whether the process is alive.
func (p *Proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done != nil && !closed(p.done)
}

// Pid is the process id of the current run.
func (p *Proc) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

func (p *Proc) current() (*exec.Cmd, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd, p.done
}

// Kill sends SIGKILL to the process alone (not the commands it started), as a crash
// would, and waits until it is gone.
func (p *Proc) Kill() {
	cmd, done := p.current()
	if cmd == nil || closed(done) {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// Signal sends sig to the process.
func (p *Proc) Signal(sig syscall.Signal) error {
	cmd, done := p.current()
	if cmd == nil || closed(done) {
		return fmt.Errorf("signalling %s: not running", p.Name)
	}
	return cmd.Process.Signal(sig)
}

// Stop sends SIGTERM and waits up to grace, then kills the group. It reports whether
// the process stopped on its own within grace.
func (p *Proc) Stop(grace time.Duration) bool {
	cmd, done := p.current()
	if cmd == nil {
		return true
	}
	clean := true
	if !closed(done) {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(grace):
			clean = false
		}
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
	return clean
}

// Log returns the process's output so far (every run).
func (p *Proc) Log() string {
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}

// cleanup stops the process when the test ends and shows its log tail on failure.
func (p *Proc) cleanup(t testing.TB) {
	t.Cleanup(func() {
		p.Stop(procStopGrace)
		if t.Failed() {
			t.Logf("%s log tail:\n%s", p.Name, tail(p.Log(), 3000))
		}
	})
}

// environWithoutMantis is the test's environment without MANTIS_ variables: a
// process's file decides its configuration.
func environWithoutMantis() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MANTIS_") {
			env = append(env, kv)
		}
	}
	return env
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

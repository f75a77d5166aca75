package devstack

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"time"
)

// Server names one of the stack's backing servers.
type Server string

// The backing servers a Stack runs.
const (
	ServerPostgres Server = "postgres"
	ServerRabbitMQ Server = "rabbitmq"
	ServerTemporal Server = "temporal"
)

// PostgresStopMode is a pg_ctl shutdown mode.
type PostgresStopMode string

// The pg_ctl shutdown modes a fault test uses: fast ends sessions and checkpoints,
// immediate is a crash (recovery runs on the next start).
const (
	PostgresStopFast      PostgresStopMode = "fast"
	PostgresStopImmediate PostgresStopMode = "immediate"
)

// serverExitTimeout bounds the wait for a signalled server to be gone.
const serverExitTimeout = 60 * time.Second

// running returns the live process of server, or nil.
func (s *Stack) running(server Server) *process {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.procs) - 1; i >= 0; i-- {
		if p := s.procs[i]; p.name == string(server) && !p.exited() {
			return p
		}
	}
	return nil
}

// forget drops the ended processes of server, so that Exited does not report a
// server the caller stopped on purpose.
func (s *Stack) forget(server Server) {
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := s.procs[:0]
	for _, p := range s.procs {
		if p.name == string(server) && p.exited() {
			continue
		}
		kept = append(kept, p)
	}
	s.procs = kept
}

// Pid is the process id of the running server (its process group leader), or 0.
func (s *Stack) Pid(server Server) int {
	if p := s.running(server); p != nil {
		return p.cmd.Process.Pid
	}
	return 0
}

// Kill sends SIGKILL to the server's whole process group, as a crash of its host
// would, and waits until it is gone.
func (s *Stack) Kill(server Server) error {
	p := s.running(server)
	if p == nil {
		return fmt.Errorf("killing %s: not running", server)
	}
	p.killGroup()
	return waitGone(p)
}

// Freeze stops every process of the server's group with SIGSTOP: it holds its
// connections and answers nothing until Thaw.
func (s *Stack) Freeze(server Server) error {
	return s.signalGroup(server, syscall.SIGSTOP)
}

// Thaw resumes a frozen server with SIGCONT.
func (s *Stack) Thaw(server Server) error {
	return s.signalGroup(server, syscall.SIGCONT)
}

func (s *Stack) signalGroup(server Server, sig syscall.Signal) error {
	p := s.running(server)
	if p == nil {
		return fmt.Errorf("sending %s to %s: not running", sig, server)
	}
	if err := syscall.Kill(-p.cmd.Process.Pid, sig); err != nil {
		return fmt.Errorf("sending %s to %s: %w", sig, server, err)
	}
	return nil
}

// StopPostgres runs `pg_ctl stop -m mode` on the stack's cluster and waits until the
// postmaster is gone.
func (s *Stack) StopPostgres(ctx context.Context, mode PostgresStopMode) error {
	p := s.running(ServerPostgres)
	if p == nil {
		return fmt.Errorf("stopping postgres: not running")
	}
	bin, err := postgresBinDir()
	if err != nil {
		return err
	}
	data := filepath.Join(s.dataRoot, "postgres", "data")
	if _, err := runAs(ctx, postgresUser, nil, filepath.Join(bin, "pg_ctl"), "stop", "-D", data, "-m", string(mode), "-w"); err != nil {
		return fmt.Errorf("stopping postgres (-m %s): %w", mode, err)
	}
	return waitGone(p)
}

// RabbitMQCtl runs rabbitmqctl against the stack's broker node, as the broker's user,
// and returns its output.
func (s *Stack) RabbitMQCtl(ctx context.Context, args ...string) (string, error) {
	if s.rabbitmqEnv == nil {
		return "", fmt.Errorf("rabbitmqctl %v: the stack runs no broker", args)
	}
	return runAs(ctx, rabbitmqUser, s.rabbitmqEnv, "/usr/lib/rabbitmq/bin/rabbitmqctl", args...)
}

// Restart starts a server that was stopped or killed again, on the same ports and the
// same data, and returns once it is ready.
func (s *Stack) Restart(ctx context.Context, server Server) error {
	start, ok := s.starters[server]
	if !ok || (server == ServerPostgres && !s.opts.Postgres) || (server == ServerRabbitMQ && !s.opts.RabbitMQ) ||
		(server == ServerTemporal && !s.opts.Temporal) {
		return fmt.Errorf("restarting %s: the stack does not run it", server)
	}
	if p := s.running(server); p != nil {
		return fmt.Errorf("restarting %s: still running as pid %d", server, p.cmd.Process.Pid)
	}
	s.forget(server)
	if err := start(ctx); err != nil {
		return fmt.Errorf("restarting %s: %w", server, err)
	}
	return nil
}

// waitGone waits until p has exited and kills whatever its group left behind.
func waitGone(p *process) error {
	select {
	case <-p.done:
		p.killGroup()
		return nil
	case <-time.After(serverExitTimeout):
		return fmt.Errorf("%s still running %s after it was told to stop", p.name, serverExitTimeout)
	}
}

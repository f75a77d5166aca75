package devstack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Install puts in place what the selected servers need and the machine lacks: the
// temporal CLI (go install) and RabbitMQ (apt, when running as root). PostgreSQL is
// expected from the OS. It does nothing when everything is there.
func Install(ctx context.Context, logger *slog.Logger, opts Options) error {
	if opts.Temporal {
		if _, err := findTemporal(); err != nil {
			logger.Info("installing the temporal CLI (first time only, takes several minutes)", "version", temporalCLIVersion)
			cmd := exec.CommandContext(ctx, "go", "install", "github.com/temporalio/cli/cmd/temporal@"+temporalCLIVersion)
			cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("installing temporal CLI %s: %w", temporalCLIVersion, err)
			}
		}
	}
	if opts.Temporal && opts.TemporalServer {
		if err := TemporalServerTools(ctx, logger); err != nil {
			return err
		}
	}
	var pkgs []string
	if opts.RabbitMQ {
		if _, err := os.Stat("/usr/lib/rabbitmq/bin/rabbitmq-server"); err != nil {
			pkgs = append(pkgs, "rabbitmq-server")
		}
	}
	if opts.Postgres {
		if _, err := postgresBinDir(); err != nil {
			pkgs = append(pkgs, "postgresql")
		}
	}
	if len(pkgs) == 0 {
		return nil
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("missing packages %s: install them (apt-get install -y %s) or run as root", strings.Join(pkgs, ", "), strings.Join(pkgs, " "))
	}
	if err := withAptLock(ctx, func() error { return aptInstall(ctx, logger, pkgs...) }); err != nil {
		return err
	}
	// The Debian package may start a broker service of its own on the default ports;
	// the stack runs its own node.
	_ = exec.CommandContext(ctx, "service", "rabbitmq-server", "stop").Run()
	return nil
}

// aptInstall installs Debian packages with apt-get (as root), without the packages
// they only recommend, its output on stderr.
func aptInstall(ctx context.Context, logger *slog.Logger, pkgs ...string) error {
	logger.Info("installing packages", "packages", pkgs)
	// Wait for an apt run outside Mantis (an unattended upgrade) rather than fail on its lock.
	wait := []string{"-o", "DPkg::Lock::Timeout=" + strconv.Itoa(int(aptWait.Seconds()))}
	for _, args := range [][]string{append([]string{"update", "-q"}, wait...),
		append(append([]string{"install", "-y", "-q", "--no-install-recommends"}, wait...), pkgs...)} {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("apt-get %s %s: %w (its output is above)", args[0], strings.Join(pkgs, " "), err)
		}
	}
	return nil
}

// findOrInstall returns the first of names found on PATH; when none is, and the
// process runs as root, it installs pkg and looks for them again (installed then
// says so).
func findOrInstall(ctx context.Context, logger *slog.Logger, pkg string, names ...string) (path string, installed bool, err error) {
	find := func() (string, error) {
		for _, name := range names {
			if p, err := exec.LookPath(name); err == nil {
				return p, nil
			}
		}
		return "", fmt.Errorf("%s: %w (apt-get install -y %s)", names[0], errNotFound, pkg)
	}
	if path, err = find(); err == nil || os.Geteuid() != 0 {
		return path, false, err
	}
	err = withAptLock(ctx, func() error {
		if _, err := find(); err == nil {
			return nil // another process installed it while this one waited
		}
		return aptInstall(ctx, logger, pkg)
	})
	if err != nil {
		return "", false, err
	}
	path, err = find()
	return path, err == nil, err
}

// aptWait bounds the wait for apt's own lock, and aptLockPoll is how often the wait for
// aptLockPath looks again.
const (
	aptWait     = 5 * time.Minute
	aptLockPoll = 100 * time.Millisecond
)

// aptLockPath serialises the stack's package installs across processes: go test runs
// packages at once, and two apt-get runs at once fail on apt's lock ("Could not get
// lock /var/lib/apt/lists/lock").
var aptLockPath = filepath.Join(os.TempDir(), "mantis-apt.lock")

// withAptLock runs fn while holding an exclusive lock on aptLockPath, waiting for it at
// most aptWait or until ctx ends.
func withAptLock(ctx context.Context, fn func() error) error {
	f, err := os.OpenFile(aptLockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("opening the package install lock: %w", err)
	}
	defer f.Close() // releases the lock
	deadline := time.Now().Add(aptWait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("taking the package install lock %s: %w", aptLockPath, err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("another package install held %s for over %s", aptLockPath, aptWait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(aptLockPoll):
		}
	}
	return fn()
}

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

// debPackage is a Debian package the stack or the test suite needs, and the binaries
// that tell it is installed (a name looked up on PATH, or an absolute path).
type debPackage struct {
	Name     string
	Binaries []string
	// StopService names a service the package starts on install that the stack does
	// not want (it runs its own on other ports).
	StopService string
}

// Debian packages the stack installs when they are missing.
var (
	rabbitmqPackage = debPackage{Name: "rabbitmq-server", Binaries: []string{"/usr/lib/rabbitmq/bin/rabbitmq-server"}, StopService: "rabbitmq-server"}
	pgbouncerDeb    = debPackage{Name: pgbouncerPackage, Binaries: []string{"pgbouncer", "/usr/sbin/pgbouncer"}, StopService: pgbouncerPackage}
	stunnelDeb      = debPackage{Name: stunnelPackage, Binaries: []string{"stunnel4", "stunnel"}}
	chromiumDeb     = debPackage{Name: "chromium", Binaries: []string{"chromium"}}
	postgresPackage = debPackage{Name: "postgresql", Binaries: []string{
		"/usr/lib/postgresql/17/bin/postgres", "/usr/lib/postgresql/16/bin/postgres", "/usr/lib/postgresql/15/bin/postgres"}}
)

// testPackages are the Debian packages the test suite runs besides the stack's servers:
// PgBouncer in front of PostgreSQL, stunnel as the TLS terminator in front of the
// Temporal dev server, and Chromium for the console's browser test. `make test`
// installs them once, before `go test` starts, so that no test installs anything.
func testPackages() []debPackage {
	return []debPackage{pgbouncerDeb, stunnelDeb, chromiumDeb}
}

// TestPackageNames lists the Debian packages Options.TestPackages installs.
func TestPackageNames() []string {
	var names []string
	for _, p := range testPackages() {
		names = append(names, p.Name)
	}
	return names
}

// Install puts in place what the selected servers need and the machine lacks: the
// temporal CLI (go install), RabbitMQ and PostgreSQL (apt, when running as root), and
// with Options.TestPackages the packages the test suite needs. It does nothing when
// everything is there.
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
	return newAptInstaller(logger).ensure(ctx, packagesFor(opts))
}

// packagesFor lists the Debian packages opts needs.
func packagesFor(opts Options) []debPackage {
	var pkgs []debPackage
	if opts.RabbitMQ {
		pkgs = append(pkgs, rabbitmqPackage)
	}
	if opts.Postgres {
		pkgs = append(pkgs, postgresPackage)
	}
	if opts.TestPackages {
		pkgs = append(pkgs, testPackages()...)
	}
	return pkgs
}

// aptInstaller installs Debian packages with apt-get, one install at a time across
// processes (lockPath).
type aptInstaller struct {
	logger *slog.Logger
	// lockPath serialises installs across processes: two apt-get runs at once fail on
	// apt's lock ("Could not get lock /var/lib/apt/lists/lock").
	lockPath string
	// look finds a binary: a name on PATH, or an absolute path that exists.
	look func(string) (string, error)
	// root says whether the process may install (apt-get needs root).
	root bool
}

func newAptInstaller(logger *slog.Logger) aptInstaller {
	return aptInstaller{
		logger:   logger,
		lockPath: filepath.Join(os.TempDir(), "mantis-apt.lock"),
		look:     exec.LookPath,
		root:     os.Geteuid() == 0,
	}
}

// find returns the first of p's binaries that look finds.
func (a aptInstaller) find(p debPackage) (string, error) {
	for _, name := range p.Binaries {
		if path, err := a.look(name); err == nil {
			return path, nil
		}
	}
	return "", fmt.Errorf("%s: %w (apt-get install -y %s)", p.Binaries[0], errNotFound, p.Name)
}

// missing returns the packages of pkgs whose binaries look does not find.
func (a aptInstaller) missing(pkgs []debPackage) []debPackage {
	var out []debPackage
	for _, p := range pkgs {
		if _, err := a.find(p); err != nil {
			out = append(out, p)
		}
	}
	return out
}

// ensure installs those of pkgs that are missing, in one apt-get run, and checks that
// each is then found.
func (a aptInstaller) ensure(ctx context.Context, pkgs []debPackage) error {
	if len(a.missing(pkgs)) == 0 {
		return nil
	}
	if !a.root {
		names := packageNames(a.missing(pkgs))
		return fmt.Errorf("missing packages %s: install them (apt-get install -y %s) or run as root",
			strings.Join(names, ", "), strings.Join(names, " "))
	}
	return a.withLock(ctx, func() error {
		todo := a.missing(pkgs) // another process may have installed some while this one waited
		if len(todo) == 0 {
			return nil
		}
		if err := a.aptGet(ctx, packageNames(todo)...); err != nil {
			return err
		}
		for _, p := range todo {
			if p.StopService != "" {
				_ = exec.CommandContext(ctx, "service", p.StopService, "stop").Run()
			}
			if _, err := a.find(p); err != nil {
				return fmt.Errorf("after installing %s: %w", p.Name, err)
			}
		}
		return nil
	})
}

func packageNames(pkgs []debPackage) []string {
	names := make([]string, len(pkgs))
	for i, p := range pkgs {
		names[i] = p.Name
	}
	return names
}

// aptGet updates the package lists and installs pkgs (as root), without the packages
// they only recommend, its output on stderr.
func (a aptInstaller) aptGet(ctx context.Context, pkgs ...string) error {
	a.logger.Info("installing packages", "packages", pkgs)
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

// findInstalled returns the binary of p, or an error saying how to install it. Tests
// and the stack find their tools this way and never install them: `make test` and
// `mantisctl dev install --test-packages` install them beforehand.
func findInstalled(p debPackage) (string, error) {
	path, err := newAptInstaller(nil).find(p)
	if err != nil {
		return "", fmt.Errorf("%w; `mantisctl dev install --test-packages` installs it, as `make test` does", err)
	}
	return path, nil
}

// aptWait bounds the wait for apt's own lock, and aptLockPoll is how often the wait for
// the install lock looks again.
const (
	aptWait     = 5 * time.Minute
	aptLockPoll = 100 * time.Millisecond
)

// withLock runs fn while holding an exclusive lock on a.lockPath, waiting for it at
// most aptWait or until ctx ends.
func (a aptInstaller) withLock(ctx context.Context, fn func() error) error {
	f, err := os.OpenFile(a.lockPath, os.O_CREATE|os.O_RDWR, 0o600)
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
			return fmt.Errorf("taking the package install lock %s: %w", a.lockPath, err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("another package install held %s for over %s", a.lockPath, aptWait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(aptLockPoll):
		}
	}
	return fn()
}

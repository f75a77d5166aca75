package devstack

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Two package installs never overlap: the second waits for the first to release the
// lock (as two processes installing packages at once must).
func TestAptLockSerialisesInstalls(t *testing.T) {
	t.Parallel()
	a := newAptInstaller(slog.New(slog.DiscardHandler))
	a.lockPath = filepath.Join(t.TempDir(), "apt.lock")
	ctx := context.Background()
	firstHolds, releaseFirst, secondRan := make(chan struct{}), make(chan struct{}), make(chan struct{})
	firstDone := make(chan error, 1)
	go func() {
		firstDone <- a.withLock(ctx, func() error {
			close(firstHolds)
			<-releaseFirst
			return nil
		})
	}()
	<-firstHolds
	secondDone := make(chan error, 1)
	go func() { secondDone <- a.withLock(ctx, func() error { close(secondRan); return nil }) }()
	require.Never(t, func() bool {
		select {
		case <-secondRan:
			return true
		default:
			return false
		}
	}, 5*aptLockPoll, aptLockPoll/2, "the second install ran while the first held the lock")
	close(releaseFirst)
	require.NoError(t, <-firstDone)
	require.NoError(t, <-secondDone)
	<-secondRan

	// A caller that gives up while waiting is told so.
	held := make(chan struct{})
	release := make(chan struct{})
	go func() {
		_ = a.withLock(ctx, func() error { close(held); <-release; return nil })
	}()
	<-held
	defer close(release)
	waitCtx, cancel := context.WithTimeout(ctx, 3*aptLockPoll)
	defer cancel()
	require.ErrorIs(t, a.withLock(waitCtx, func() error { t.Error("ran without the lock"); return nil }), context.DeadlineExceeded)
}

// fakeAptGet writes an apt-get into a directory of its own that records each call's
// arguments in a log and, for install, "installs" each package by putting an
// executable of the package's name beside itself. It returns the directory and the
// log's path.
func fakeAptGet(t *testing.T) (dir, log string) {
	dir = t.TempDir()
	log = filepath.Join(dir, "calls.log")
	script := `#!/bin/sh
echo "$*" >> "` + log + `"
[ "$1" = install ] || exit 0
for arg in "$@"; do
	case "$arg" in
	-*|install|DPkg::*) ;;
	*) printf '#!/bin/sh\n' > "` + dir + `/$arg"; /bin/chmod +x "` + dir + `/$arg" ;;
	esac
done
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "apt-get"), []byte(script), 0o755))
	return dir, log
}

// The suite's packages are installed through apt-get, all in one run, before any test
// needs them; a second run finds them and calls apt-get no more. A fake apt-get first
// on PATH records the calls, so no real package is installed or removed.
func TestInstallPutsTheTestPackagesInPlaceWithAptGet(t *testing.T) {
	dir, log := fakeAptGet(t)
	t.Setenv("PATH", dir) // restored when the test ends
	a := newAptInstaller(slog.New(slog.DiscardHandler))
	a.lockPath = filepath.Join(t.TempDir(), "apt.lock")
	a.root = true
	// Only what the fake PATH holds counts as installed, whatever this machine has.
	a.look = func(name string) (string, error) {
		if filepath.IsAbs(name) {
			return "", errNotFound
		}
		return exec.LookPath(name)
	}
	pkgs := packagesFor(Options{TestPackages: true})
	require.ElementsMatch(t, []string{"pgbouncer", "stunnel4", "chromium"}, packageNames(pkgs))
	require.Len(t, a.missing(pkgs), len(pkgs), "nothing is installed before the install step")

	require.NoError(t, a.ensure(context.Background(), pkgs))
	calls := readCalls(t, log)
	require.Len(t, calls, 2, "apt-get update, then one install of every package: %q", calls)
	require.True(t, strings.HasPrefix(calls[0], "update "), calls[0])
	require.True(t, strings.HasPrefix(calls[1], "install -y "), calls[1])
	for _, name := range []string{"pgbouncer", "stunnel4", "chromium"} {
		require.Contains(t, strings.Fields(calls[1]), name)
	}
	require.Empty(t, a.missing(pkgs), "every package is found after the install step")

	require.NoError(t, a.ensure(context.Background(), pkgs))
	require.Len(t, readCalls(t, log), 2, "a second run installs nothing")
}

// Without root, a missing package is an error that says how to install it, and
// apt-get is never called.
func TestInstallWithoutRootNamesTheMissingPackages(t *testing.T) {
	dir, log := fakeAptGet(t)
	t.Setenv("PATH", dir)
	a := newAptInstaller(slog.New(slog.DiscardHandler))
	a.lockPath = filepath.Join(t.TempDir(), "apt.lock")
	a.root = false
	a.look = func(name string) (string, error) { return "", errNotFound }
	err := a.ensure(context.Background(), packagesFor(Options{TestPackages: true}))
	require.ErrorContains(t, err, "apt-get install -y pgbouncer stunnel4 chromium")
	require.NoFileExists(t, log)
}

func readCalls(t *testing.T, log string) []string {
	b, err := os.ReadFile(log)
	require.NoError(t, err)
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

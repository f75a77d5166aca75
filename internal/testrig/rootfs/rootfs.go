// Package rootfs gives tests a Debian 12 root file system to run programs in under
// chroot: the agent image's user space without a container engine, or a host a
// package or a configuration run is applied to.
//
// Debian builds the root once with debootstrap --variant=minbase bookworm plus the
// packages asked for, keeps it under .mantis/cache/rootfs keyed by that list, and
// hands each test a copy of its own. It needs root, debootstrap, chroot and a
// reachable Debian mirror; tests run it only when MANTIS_ROOTFS=1, which the make
// targets that install debootstrap first set (make deploy-check, make
// release-check), and skip otherwise.
package rootfs

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

// Suite and Mirror are the Debian release and the mirror debootstrap installs from;
// MANTIS_DEBIAN_MIRROR overrides the mirror.
const (
	Suite  = "bookworm"
	Mirror = "http://deb.debian.org/debian"
	// EnableVar is the environment variable that turns the rig on.
	EnableVar = "MANTIS_ROOTFS"
)

// buildMu serialises the builds of one test binary; a file lock serialises those
// of several.
var buildMu sync.Mutex

// Enabled reports whether MANTIS_ROOTFS=1 asks for root file systems.
func Enabled() bool { return os.Getenv(EnableVar) == "1" }

// Require skips the test unless the rig is enabled, and fails it when the rig is
// enabled but cannot run (not root, debootstrap or chroot missing).
func Require(t testing.TB) {
	t.Helper()
	if !Enabled() {
		t.Skipf("%s=1 runs this test (make deploy-check and make release-check set it after installing debootstrap)", EnableVar)
	}
	if os.Geteuid() != 0 {
		t.Fatalf("rootfs: %s=1 but not root: debootstrap and chroot need root", EnableVar)
	}
	for _, tool := range []string{"debootstrap", "chroot"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("rootfs: %s missing (apt-get install -y debootstrap; make deploy-check does)", tool)
		}
	}
}

// Debian returns the path of a fresh Debian 12 root with packages installed,
// removed when the test ends. The first call for a package list builds the
// cached root (about a minute); later ones copy it (seconds).
func Debian(t testing.TB, packages ...string) string {
	t.Helper()
	Require(t)
	cached, err := cachedRoot(testenv.RepoRoot(t), packages)
	if err != nil {
		t.Fatalf("rootfs: %v", err)
	}
	root := filepath.Join(t.TempDir(), "root")
	if out, err := exec.Command("cp", "-a", cached, root).CombinedOutput(); err != nil {
		t.Fatalf("rootfs: copying %s: %v\n%s", cached, err, out)
	}
	return root
}

// Command returns a command running argv inside root under chroot, with the
// environment a login would give: PATH of the root, HOME=/root, LANG=C.UTF-8.
func Command(root string, argv ...string) *exec.Cmd {
	cmd := exec.Command("chroot", append([]string{root}, argv...)...)
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "LANG=C.UTF-8"}
	return cmd
}

// Run runs argv inside root and returns its combined output; the test fails when
// the command fails.
func Run(t testing.TB, root string, argv ...string) string {
	t.Helper()
	out, err := Command(root, argv...).CombinedOutput()
	if err != nil {
		t.Fatalf("rootfs: %s in %s: %v\n%s", strings.Join(argv, " "), root, err, out)
	}
	return string(out)
}

// MountProc mounts a proc file system at root/proc for programs that read it (ps,
// some package scripts), unmounted when the test ends.
func MountProc(t testing.TB, root string) {
	t.Helper()
	target := filepath.Join(root, "proc")
	if err := syscall.Mount("proc", target, "proc", 0, ""); err != nil {
		t.Fatalf("rootfs: mounting proc at %s: %v", target, err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(target, syscall.MNT_DETACH) })
}

// Key names the cached root of a package list: the suite and a hash of the sorted,
// deduplicated list.
func Key(packages []string) string {
	list := slices.Clone(packages)
	slices.Sort(list)
	list = slices.Compact(list)
	sum := sha256.Sum256([]byte(Suite + "\n" + strings.Join(list, "\n")))
	return Suite + "-" + hex.EncodeToString(sum[:])[:16]
}

// cachedRoot returns the cached root of packages under repo's .mantis/cache,
// building it first when it is missing.
func cachedRoot(repo string, packages []string) (string, error) {
	buildMu.Lock()
	defer buildMu.Unlock()
	dir := filepath.Join(repo, ".mantis", "cache", "rootfs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	root := filepath.Join(dir, Key(packages))
	if _, err := os.Stat(filepath.Join(root, "etc", "debian_version")); err == nil {
		return root, nil
	}
	if err := build(root, packages); err != nil {
		return "", err
	}
	return root, nil
}

// build runs debootstrap into a temporary directory beside root and renames it
// into place, so that a build cut short leaves no root that looks whole.
func build(root string, packages []string) error {
	tmp := root + ".partial"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	mirror := Mirror
	if m := os.Getenv("MANTIS_DEBIAN_MIRROR"); m != "" {
		mirror = m
	}
	args := []string{"--variant=minbase"}
	if len(packages) > 0 {
		args = append(args, "--include="+strings.Join(packages, ","))
	}
	args = append(args, Suite, tmp, mirror)
	out, err := exec.Command("debootstrap", args...).CombinedOutput()
	if err != nil {
		_ = os.RemoveAll(tmp)
		return fmt.Errorf("debootstrap %s: %w\n%s", strings.Join(args, " "), err, tail(out, 3000))
	}
	// The downloaded archives are installed: each copy need not carry them. The
	// package lists stay, so that apt-get install works in a copy without update.
	matches, _ := filepath.Glob(filepath.Join(tmp, "var/cache/apt/archives/*.deb"))
	for _, m := range matches {
		_ = os.Remove(m)
	}
	_ = os.RemoveAll(root)
	return os.Rename(tmp, root)
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

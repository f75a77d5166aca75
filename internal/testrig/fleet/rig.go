// Package fleet builds hosts out of network namespaces, as root, for tests that run
// Mantis across several machines on one: each host has its own network namespace
// with an address on a bridge of the rig's (10.231.0.0/24, nothing else routed), its
// own host name, its own /etc entries (through /etc/netns/<namespace>/, which `ip
// netns exec` binds over /etc) and its own copies of chosen directories (bound over
// them in a private mount namespace), so that what a test installs on a host leaves
// the machine unchanged. Every namespace, directory and process the rig makes is
// removed when the test ends, and a new rig first sweeps what a dead run left.
package fleet

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// Prefix starts the name of every namespace and directory a rig makes:
// mfl-<pid>-<host>, so that a sweep can tell a dead run's from a live one's.
const Prefix = "mfl-"

// EnableEnv is the variable that makes the rig's tests run (make test-fleet sets
// it); without it they skip, so that `go test ./...` stays as it is.
const EnableEnv = "MANTIS_TEST_FLEET"

// subnet is the private range the rig owns inside its namespaces.
var subnet = netip.MustParsePrefix("10.231.0.0/24")

// Options describes the hosts of a rig.
type Options struct {
	// Hosts are the hosts' names (and host names), in order: the first gets
	// 10.231.0.1, the next 10.231.0.2, and so on.
	Hosts []string
	// Etc are entries under /etc each host gets its own (empty) directory for, e.g.
	// "mantis" for /etc/mantis.
	Etc []string
	// Private are absolute directories each host gets its own empty copy of, e.g.
	// /usr/local/bin or /var/lib/mantis.
	Private []string
	// Tools are commands the test needs besides the rig's own (ip, unshare,
	// mount, hostname); Files are files it needs (built binaries). Preflight names
	// what is missing.
	Tools []string
	Files []string
}

// Rig is a set of hosts and the bridge between them.
type Rig struct {
	t     testing.TB
	id    string
	dir   string
	hosts []*Host
	// made are the directories outside dir the rig created, removed at the end
	// when still empty (mount points of /etc/mantis, say).
	made []string
}

// RequireEnabled skips the test unless EnableEnv is set.
func RequireEnabled(t testing.TB) {
	t.Helper()
	if os.Getenv(EnableEnv) == "" {
		t.Skipf("network-namespace fleet test: set %s=1 (make test-fleet runs it as root)", EnableEnv)
	}
}

// Preflight returns what the rig needs and the machine lacks: root, the tools, the
// files.
func Preflight(opts Options) []string {
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root (network namespaces and bind mounts)")
	}
	for _, tool := range append([]string{"ip", "unshare", "mount", "hostname", "setpriv"}, opts.Tools...) {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, "the "+tool+" command")
		}
	}
	for _, f := range opts.Files {
		if _, err := os.Stat(f); err != nil {
			missing = append(missing, f+" (make build)")
		}
	}
	return missing
}

// New builds the hosts of opts, or skips the test when not root and fails it when
// another need is missing. Everything it makes goes at the test's end.
func New(t testing.TB, opts Options) *Rig {
	t.Helper()
	if missing := Preflight(opts); len(missing) > 0 {
		msg := "fleet rig: missing " + strings.Join(missing, ", ")
		if os.Geteuid() != 0 {
			t.Skip(msg)
		}
		t.Fatal(msg)
	}
	if len(opts.Hosts) == 0 || len(opts.Hosts) > 200 {
		t.Fatalf("fleet rig: %d hosts, want 1 to 200", len(opts.Hosts))
	}
	Sweep(t)
	r := &Rig{t: t, id: Prefix + strconv.Itoa(os.Getpid())}
	dir, err := os.MkdirTemp("", r.id+"-")
	if err != nil {
		t.Fatal(err)
	}
	// The servers a test runs may drop privileges: they must reach the rig's files.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r.dir = dir
	t.Cleanup(r.cleanup)
	for _, p := range append(append([]string{"/etc/netns"}, etcPaths(opts.Etc)...), opts.Private...) {
		r.mountPoint(p)
	}
	if err := r.bridge(); err != nil {
		t.Fatalf("fleet rig: %v", err)
	}
	for i, name := range opts.Hosts {
		h, err := r.addHost(name, i, opts)
		if err != nil {
			t.Fatalf("fleet rig: host %s: %v", name, err)
		}
		if err := h.checkView(); err != nil {
			t.Fatalf("fleet rig: host %s: %v", name, err)
		}
		r.hosts = append(r.hosts, h)
	}
	return r
}

// checkView proves the host sees its own /etc entries (ip netns exec binds
// /etc/netns/<namespace>/<entry> over /etc/<entry>) and private directories: a file
// the rig puts in each is there inside, and the host name is the host's.
func (h *Host) checkView() error {
	script := `test "$(hostname)" = "$1" || { echo "host name $(hostname)"; exit 1; }; shift
for f; do test -e "$f" || { echo "$f not seen"; exit 1; }; done`
	args := []string{"-c", script, "sh", h.name}
	var probes []string
	for _, dir := range append(etcPaths(h.etc), bindTargets(h.binds)...) {
		probe := filepath.Join(dir, ".fleet-probe")
		if err := os.WriteFile(h.Path(probe), nil, 0o600); err != nil {
			return err
		}
		probes = append(probes, h.Path(probe))
		args = append(args, probe)
	}
	_, err := h.Exec(context.Background(), "sh", args...)
	for _, p := range probes {
		_ = os.Remove(p)
	}
	return err
}

func bindTargets(binds []bind) []string {
	var out []string
	for _, b := range binds {
		out = append(out, b.to)
	}
	return out
}

func etcPaths(entries []string) []string {
	var out []string
	for _, e := range entries {
		out = append(out, filepath.Join("/etc", e))
	}
	return out
}

// mountPoint makes sure path exists (to be bound over, or /etc/netns), and
// remembers to remove it when the rig made it.
func (r *Rig) mountPoint(path string) {
	if _, err := os.Stat(path); err == nil {
		return
	}
	if err := os.MkdirAll(path, 0o755); err != nil {
		r.t.Fatalf("fleet rig: mount point %s: %v", path, err)
	}
	r.made = append(r.made, path)
	// A sweep after a run that died before its cleanup removes them from this list.
	if err := os.WriteFile(filepath.Join(r.dir, madeFile), []byte(strings.Join(r.made, "\n")+"\n"), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

// madeFile, in a rig's directory, lists the directories outside it the rig made.
const madeFile = "made"

// removeMade removes the directories of list, last first, when empty.
func removeMade(list []string) error {
	var errs []error
	for i := len(list) - 1; i >= 0; i-- {
		// Another live rig may still use it: then it stays.
		if err := os.Remove(list[i]); err != nil && !errors.Is(err, os.ErrNotExist) &&
			!errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, syscall.EBUSY) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Dir is the rig's own directory, removed at the end (mode 0755).
func (r *Rig) Dir() string { return r.dir }

// Hosts returns the hosts in the order of Options.Hosts.
func (r *Rig) Hosts() []*Host { return r.hosts }

// Host returns the named host, or nil.
func (r *Rig) Host(name string) *Host {
	for _, h := range r.hosts {
		if h.name == name {
			return h
		}
	}
	return nil
}

// switchNS is the namespace holding the bridge.
func (r *Rig) switchNS() string { return r.id + "-sw" }

// SwitchNamespace is the network namespace holding the bridge (br0) and each host's
// Port.
func (r *Rig) SwitchNamespace() string { return r.switchNS() }

func (r *Rig) bridge() error {
	sw := r.switchNS()
	return run([][]string{
		{"ip", "netns", "add", sw},
		{"ip", "-n", sw, "link", "add", "br0", "type", "bridge"},
		{"ip", "-n", sw, "link", "set", "br0", "up"},
	})
}

func (r *Rig) addHost(name string, i int, opts Options) (*Host, error) {
	addr := subnet.Addr()
	for range i + 1 {
		addr = addr.Next()
	}
	h := &Host{rig: r, name: name, ns: r.id + "-" + name, addr: addr, root: filepath.Join(r.dir, name)}
	sw, port := r.switchNS(), "p"+strconv.Itoa(i)
	h.port = port
	err := run([][]string{
		{"ip", "netns", "add", h.ns},
		{"ip", "-n", h.ns, "link", "set", "lo", "up"},
		{"ip", "-n", sw, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", h.ns},
		{"ip", "-n", sw, "link", "set", port, "master", "br0", "up"},
		{"ip", "-n", h.ns, "addr", "add", netip.PrefixFrom(addr, subnet.Bits()).String(), "dev", "eth0"},
		{"ip", "-n", h.ns, "link", "set", "eth0", "up"},
	})
	if err != nil {
		return nil, err
	}
	for _, e := range opts.Etc {
		if err := os.MkdirAll(filepath.Join("/etc/netns", h.ns, e), 0o755); err != nil {
			return nil, err
		}
	}
	for _, p := range opts.Private {
		src := filepath.Join(h.root, "private", strings.ReplaceAll(strings.Trim(p, "/"), "/", "_"))
		if err := os.MkdirAll(src, 0o755); err != nil {
			return nil, err
		}
		h.binds = append(h.binds, bind{from: src, to: p})
	}
	h.etc = opts.Etc
	return h, os.MkdirAll(filepath.Join(h.root, "logs"), 0o755)
}

func run(cmds [][]string) error {
	for _, c := range cmds {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v: %s", strings.Join(c, " "), err, out)
		}
	}
	return nil
}

// cleanup removes the namespaces (their links go with them), the /etc/netns
// directories, the mount points the rig made and its directory.
func (r *Rig) cleanup() {
	var errs []error
	// By name rather than r.hosts: a host whose set-up failed half-way goes too.
	for _, ns := range r.namespaces() {
		errs = append(errs, removeNetns(ns))
	}
	errs = append(errs, removeMade(r.made), os.RemoveAll(r.dir))
	if err := errors.Join(errs...); err != nil {
		r.t.Errorf("fleet rig cleanup: %v", err)
	}
}

// namespaces are the names in /run/netns and /etc/netns of this rig.
func (r *Rig) namespaces() []string {
	var out []string
	for _, dir := range []string{"/run/netns", "/etc/netns"} {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), r.id+"-") && !slices.Contains(out, e.Name()) {
				out = append(out, e.Name())
			}
		}
	}
	return out
}

// removeNetns kills what still runs in the namespace (a dead run's servers, say),
// then deletes it and its /etc/netns directory.
func removeNetns(ns string) error {
	var err error
	if _, statErr := os.Stat(filepath.Join("/run/netns", ns)); statErr == nil {
		out, _ := exec.Command("ip", "netns", "pids", ns).Output()
		for _, f := range strings.Fields(string(out)) {
			if pid, convErr := strconv.Atoi(f); convErr == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		err = run([][]string{{"ip", "netns", "del", ns}})
	}
	return errors.Join(err, os.RemoveAll(filepath.Join("/etc/netns", ns)))
}

// Sweep removes the namespaces (and what runs in them), /etc/netns directories,
// temporary directories and mount points of rigs whose process is gone.
func Sweep(t testing.TB) {
	t.Helper()
	var stale []string
	for _, dir := range []string{"/run/netns", "/etc/netns"} {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if deadRun(e.Name()) {
				stale = append(stale, e.Name())
			}
		}
	}
	for _, ns := range stale {
		if err := removeNetns(ns); err != nil {
			t.Logf("fleet rig: sweeping %s: %v", ns, err)
		}
	}
	tmp, _ := os.ReadDir(os.TempDir())
	for _, e := range tmp {
		if !deadRun(e.Name()) {
			continue
		}
		dir := filepath.Join(os.TempDir(), e.Name())
		if made, err := os.ReadFile(filepath.Join(dir, madeFile)); err == nil {
			if err := removeMade(strings.Fields(string(made))); err != nil {
				t.Logf("fleet rig: sweeping %s: %v", dir, err)
			}
		}
		_ = os.RemoveAll(dir)
	}
}

// deadRun reports whether name is one of a rig's, mfl-<pid>-..., whose process is
// gone.
func deadRun(name string) bool {
	rest, ok := strings.CutPrefix(name, Prefix)
	if !ok {
		return false
	}
	pidText, _, _ := strings.Cut(rest, "-")
	pid, err := strconv.Atoi(pidText)
	if err != nil || pid <= 0 {
		return false
	}
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

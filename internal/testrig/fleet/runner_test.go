package fleet_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mantis-deploy/mantis/internal/testrig/devstack"
	"github.com/mantis-deploy/mantis/internal/testrig/fleet"
)

// runner runs a page's blocks on the rig's hosts, one session per host.
type runner struct {
	t        *testing.T
	rig      *fleet.Rig
	repo     string
	vars     map[string]string
	shims    string
	sessions map[string]*fleet.Session
	procs    []*fleet.Process
	ran      []string
	started  []string
}

// scpShim copies local files to [user@]host:path through the named host's own view
// of its files (FLEET_HOSTS holds a script per host that runs a command there).
const scpShim = `#!/bin/sh
# scp stand-in of the fleet test: [options] FILE... [user@]HOST:PATH
set -eu
while [ $# -gt 0 ]; do case $1 in -[oPiF]) shift 2 ;; -*) shift ;; *) break ;; esac; done
n=$(($# - 1)); eval "dest=\${$#}"
remote=${dest#*@}; host=${remote%%:*}; path=${remote#*:}
[ -x "$FLEET_HOSTS/$host" ] || { echo "scp: unknown host $host" >&2; exit 1; }
while [ "$n" -gt 0 ]; do
	src=$1; shift; n=$((n - 1))
	"$FLEET_HOSTS/$host" sh -c 'if [ -d "$1" ]; then t="$1/$2"; else t=$1; fi; cat > "$t" && chmod "$3" "$t"' \
		sh "$path" "$(basename "$src")" "$(stat -c %a "$src")" < "$src"
done
`

// systemctlShim records the units to start; the runner starts them, as systemd
// would, once the block is done.
const systemctlShim = `#!/bin/sh
# systemctl stand-in of the fleet test: daemon-reload, enable --now UNIT...
case $1 in
daemon-reload) exit 0 ;;
enable) shift; [ "$1" = --now ] || { echo "systemctl: enable without --now" >&2; exit 1; }; shift
	for u; do echo "$u" >> "$FLEET_STATE/start"; done ;;
*) echo "systemctl stand-in: $* not supported" >&2; exit 1 ;;
esac
`

func newRunner(t *testing.T, rig *fleet.Rig, repo string, vars map[string]string) *runner {
	t.Helper()
	r := &runner{t: t, rig: rig, repo: repo, vars: vars, sessions: map[string]*fleet.Session{}}
	r.shims = filepath.Join(rig.Dir(), "shims")
	hostsDir := filepath.Join(rig.Dir(), "hosts")
	files := map[string]string{filepath.Join(r.shims, "scp"): scpShim, filepath.Join(r.shims, "systemctl"): systemctlShim}
	for _, h := range rig.Hosts() {
		files[filepath.Join(hostsDir, h.Name())] = h.Script()
	}
	for path, text := range files {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, h := range rig.Hosts() {
		for _, d := range []string{"home", "systemctl"} {
			if err := os.MkdirAll(filepath.Join(h.Root(), d), 0o700); err != nil {
				t.Fatal(err)
			}
		}
		dir := filepath.Join(h.Root(), "home")
		if h.Name() == control {
			dir = repo
		}
		s, err := h.NewSession(dir, r.env(h))
		if err != nil {
			t.Fatal(err)
		}
		r.sessions[h.Name()] = s
	}
	return r
}

// env is the whole environment of the host's operator shell: the shims first on
// PATH, a home of the host's, the Go caches of the machine (make build) and the
// page's variables.
func (r *runner) env(h *fleet.Host) []string {
	goBin, _ := exec.LookPath("go")
	env := []string{
		"PATH=" + r.shims + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:" + filepath.Dir(goBin),
		"HOME=" + filepath.Join(h.Root(), "home"),
		"LANG=C.UTF-8",
		"FLEET_HOSTS=" + filepath.Join(r.rig.Dir(), "hosts"),
		"FLEET_STATE=" + filepath.Join(h.Root(), "systemctl"),
	}
	for _, k := range []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOTOOLCHAIN", "GOFLAGS", "GOPROXY"} {
		if out, err := exec.Command("go", "env", k).Output(); err == nil && len(strings.TrimSpace(string(out))) > 0 {
			env = append(env, k+"="+strings.TrimSpace(string(out)))
		}
	}
	for k, v := range r.vars {
		env = append(env, k+"="+v)
	}
	return env
}

// page runs the page's blocks marked host=..., in order, on host when set (an
// included page) or on the hosts each names.
func (r *runner) page(ctx context.Context, path, host string) {
	r.t.Helper()
	blocks, err := fleet.ReadBlocks(path)
	if err != nil {
		r.t.Fatal(err)
	}
	for _, b := range blocks {
		if b.Include != "" {
			r.page(ctx, b.Include, b.Attrs["host"])
			continue
		}
		name, marked := b.Attrs["host"]
		if !marked {
			continue
		}
		if b.Lang != "sh" {
			r.t.Fatalf("%s: a block marked host= must be sh, not %q", b.Where(), b.Lang)
		}
		if host != "" {
			name = host
		}
		for _, h := range r.hosts(b, name) {
			r.block(ctx, b, h)
		}
	}
}

func (r *runner) hosts(b fleet.Block, name string) []*fleet.Host {
	switch name {
	case "all":
		return r.rig.Hosts()
	case "all-targets":
		var out []*fleet.Host
		for _, t := range targets {
			out = append(out, r.rig.Host(t))
		}
		return out
	}
	h := r.rig.Host(name)
	if h == nil {
		r.t.Fatalf("%s: no host %q (control, %s, all-targets, all)", b.Where(), name, strings.Join(targets, ", "))
	}
	return []*fleet.Host{h}
}

// block runs one block on h, then starts the units its systemctl enable --now named.
func (r *runner) block(ctx context.Context, b fleet.Block, h *fleet.Host) {
	r.t.Helper()
	start := time.Now()
	out, err := r.sessions[h.Name()].Run(ctx, b.Text)
	r.t.Logf("%s on %s (%s):\n%s", b.Where(), h.Name(), time.Since(start).Round(time.Millisecond), out)
	if err != nil {
		r.t.Fatalf("%s on %s: %v", b.Where(), h.Name(), err)
	}
	if !slices.Contains(r.ran, h.Name()) {
		r.ran = append(r.ran, h.Name())
	}
	requests := filepath.Join(h.Root(), "systemctl", "start")
	names, err := os.ReadFile(requests)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	if err != nil {
		r.t.Fatal(err)
	}
	_ = os.Remove(requests)
	for _, unit := range strings.Fields(string(names)) {
		p, err := h.StartUnit(ctx, unit)
		if p != nil {
			r.procs = append(r.procs, p)
		}
		if err != nil {
			r.t.Fatalf("%s on %s: systemctl enable --now %s: %v", b.Where(), h.Name(), unit, err)
		}
		r.started = append(r.started, h.Name()+"/"+unit)
		r.t.Logf("%s on %s: %s ready", b.Where(), h.Name(), unit)
	}
}

// dumpLogs prints the tail of the dev stack's log and of every unit's.
func (r *runner) dumpLogs() {
	stack := filepath.Join(r.rig.Host(control).Root(), "logs", "dev-stack.log")
	if b, err := os.ReadFile(stack); err == nil {
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		r.t.Logf("--- dev stack\n%s", strings.Join(lines[max(0, len(lines)-20):], "\n"))
	}
	for _, p := range r.procs {
		r.t.Logf("--- %s (%s)\n%s", p.Name, p.LogPath, p.Tail(40))
	}
}

// startStack starts PostgreSQL, RabbitMQ with TLS and Temporal in the control host's
// namespace with `mantisctl dev exec`, and returns their stack.env. They stop at the
// test's end.
func startStack(t *testing.T, h *fleet.Host, repo, dir string) map[string]string {
	t.Helper()
	ready := filepath.Join(dir, "fleet-ready")
	cmd := h.NetnsCommand(context.Background(), filepath.Join(repo, "bin", "mantisctl"), "dev", "exec", "--dir", dir,
		"--", "sh", "-c", `touch "$MANTIS_STACK_DIR/fleet-ready" && exec sleep 86400`)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(h.Root(), "logs", "dev-stack.log")
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(90 * time.Second):
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	})
	deadline := time.After(5 * time.Minute)
	for {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		select {
		case <-done:
			b, _ := os.ReadFile(logPath)
			t.Fatalf("the dev stack exited before it was ready:\n%s", b)
		case <-deadline:
			t.Fatal("the dev stack was not ready within 5 minutes")
		case <-time.After(200 * time.Millisecond):
		}
	}
	env, err := devstack.ReadEnv(filepath.Join(dir, "stack.env"))
	if err != nil {
		t.Fatal(err)
	}
	return env
}

package fleet

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"time"
)

// Unit is what the rig reads of a systemd service unit to start it as systemd
// would, where no systemd runs as PID 1.
type Unit struct {
	ExecStart []string
	// EnvironmentFiles are the unit's EnvironmentFile= paths; a leading "-" (a
	// missing file is fine) is kept.
	EnvironmentFiles []string
	StateDirectory   string
	User, Group      string
	DynamicUser      bool
	Supplementary    []string
	Type             string
}

// ParseUnit reads the [Service] keys Unit holds. ExecStart is split on spaces (the
// rig's units quote nothing).
func ParseUnit(text string) (Unit, error) {
	var u Unit
	section := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";") {
			continue
		}
		if strings.HasPrefix(line, "[") {
			section = line
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok || section != "[Service]" {
			continue
		}
		switch key {
		case "ExecStart":
			u.ExecStart = strings.Fields(value)
		case "EnvironmentFile":
			u.EnvironmentFiles = append(u.EnvironmentFiles, value)
		case "StateDirectory":
			u.StateDirectory = value
		case "User":
			u.User = value
		case "Group":
			u.Group = value
		case "DynamicUser":
			u.DynamicUser = value == "yes" || value == "true"
		case "SupplementaryGroups":
			u.Supplementary = append(u.Supplementary, strings.Fields(value)...)
		case "Type":
			u.Type = value
		}
	}
	if len(u.ExecStart) == 0 {
		return u, fmt.Errorf("unit has no ExecStart")
	}
	return u, sc.Err()
}

// dynamicUID is the user id the rig runs a DynamicUser= unit as: in systemd's
// dynamic range (61184-65519), owned by nobody on the machine.
const dynamicUID = 61184

// unitDir is where the host's units are installed.
const unitDir = "/etc/systemd/system"

// StartUnit starts the host's installed unit (unitDir/<name>.service) as `systemctl
// start` would: after `systemd-analyze verify` of the file on the host, its
// ExecStart as its user and groups (a DynamicUser= unit as an unused uid in its
// Group=), with only its EnvironmentFile= variables, STATE_DIRECTORY made under
// /var/lib, and for Type=notify NOTIFY_SOCKET, returning once READY=1 arrived.
func (h *Host) StartUnit(ctx context.Context, name string) (*Process, error) {
	name = strings.TrimSuffix(name, ".service")
	path := filepath.Join(unitDir, name+".service")
	text, err := os.ReadFile(h.Path(path))
	if err != nil {
		return nil, err
	}
	if out, err := h.Exec(ctx, "systemd-analyze", "verify", path); err != nil || len(out) > 0 {
		return nil, fmt.Errorf("systemd-analyze verify %s on %s: %v: %s", path, h.name, err, out)
	}
	u, err := ParseUnit(string(text))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	env, err := h.unitEnv(u)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	argv, err := unitArgv(u)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var notify *net.UnixConn
	if u.Type == "notify" {
		sock := filepath.Join(h.root, name+".notify")
		_ = os.Remove(sock)
		if notify, err = net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"}); err != nil {
			return nil, err
		}
		defer notify.Close()
		if err := os.Chmod(sock, 0o777); err != nil {
			return nil, err
		}
		env = append(env, "NOTIFY_SOCKET="+sock)
	}
	p, err := h.Start(name, env, argv...)
	if err != nil || notify == nil {
		return p, err
	}
	return p, awaitReady(ctx, notify, p)
}

// unitEnv is the environment systemd gives the unit's process: a fixed PATH, LANG,
// STATE_DIRECTORY, and the variables of its environment files.
func (h *Host) unitEnv(u Unit) ([]string, error) {
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}
	if u.StateDirectory != "" {
		dir := filepath.Join("/var/lib", u.StateDirectory)
		if err := os.MkdirAll(h.Path(dir), 0o700); err != nil {
			return nil, err
		}
		env = append(env, "STATE_DIRECTORY="+dir)
	}
	for _, f := range u.EnvironmentFiles {
		path, optional := strings.CutPrefix(f, "-")
		vars, err := readEnvFile(h.Path(path))
		if os.IsNotExist(err) && optional {
			continue
		}
		if err != nil {
			return nil, err
		}
		env = append(env, vars...)
	}
	return env, nil
}

// readEnvFile reads KEY=VALUE lines, a value optionally in single or double quotes.
func readEnvFile(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("%s: not KEY=VALUE: %q", path, line)
		}
		if len(v) >= 2 && (v[0] == '\'' || v[0] == '"') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		out = append(out, strings.TrimSpace(k)+"="+v)
	}
	return out, nil
}

// unitArgv is ExecStart, behind setpriv when the unit names a user or group.
func unitArgv(u Unit) ([]string, error) {
	if u.User == "" && u.Group == "" {
		return u.ExecStart, nil
	}
	uid := "0"
	if u.User != "" {
		if usr, err := user.Lookup(u.User); err == nil {
			uid = usr.Uid
		} else if u.DynamicUser {
			uid = fmt.Sprint(dynamicUID)
		} else {
			return nil, fmt.Errorf("user %s: %w", u.User, err)
		}
	}
	gid, err := lookupGroup(u.Group)
	if err != nil {
		return nil, err
	}
	groups := []string{}
	for _, g := range u.Supplementary {
		id, err := lookupGroup(g)
		if err != nil {
			return nil, err
		}
		groups = append(groups, id)
	}
	argv := []string{"setpriv", "--reuid", uid, "--regid", gid}
	if len(groups) > 0 {
		argv = append(argv, "--groups", strings.Join(groups, ","))
	} else {
		argv = append(argv, "--clear-groups")
	}
	return append(append(argv, "--"), u.ExecStart...), nil
}

func lookupGroup(name string) (string, error) {
	if name == "" {
		return "0", nil
	}
	g, err := user.LookupGroup(name)
	if err != nil {
		return "", fmt.Errorf("group %s: %w", name, err)
	}
	return g.Gid, nil
}

// awaitReady waits for READY=1 on conn, the process's exit or two minutes.
func awaitReady(ctx context.Context, conn *net.UnixConn, p *Process) error {
	deadline := time.Now().Add(2 * time.Minute)
	buf := make([]byte, 4096)
	for time.Now().Before(deadline) {
		select {
		case <-p.Done():
			return fmt.Errorf("%s: %w before READY=1 (%v):\n%s", p.Name, errExited, p.Err(), p.Tail(30))
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		_ = conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		n, err := conn.Read(buf)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(buf[:n]), "\n") {
			if line == "READY=1" {
				return nil
			}
		}
	}
	return fmt.Errorf("%s: no READY=1 within 2 minutes:\n%s", p.Name, p.Tail(30))
}

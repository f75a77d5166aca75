package fleet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// Session is an operator's shell on a host, as a page of instructions assumes one:
// each script runs in bash with -euo pipefail, and the variables and functions it
// defines and the directory it ends in carry over to the next script of the session.
type Session struct {
	host  *Host
	dir   string
	env   []string
	count int
}

// sessionScript runs a script of a session: bash sessionScript STATE SCRIPT. The
// variables present before the state is restored are the environment's; what the
// script adds on top of them is saved with the functions and the directory.
const sessionScript = `__state=$1 __script=$2
__base=" $(compgen -v | tr '\n' ' ') "
. "$__state"
set -euo pipefail
. "$__script"
set +eu
{
	for __v in $(compgen -v); do
		case "$__base" in *" $__v "*) continue ;; esac
		case $__v in __* | _ | BASH_* | FUNCNAME | PIPESTATUS | OLDPWD) continue ;; esac
		declare -p "$__v"
	done
	declare -f
	printf 'cd %q\n' "$PWD"
} > "$__state.new" && mv "$__state.new" "$__state"
`

// NewSession starts a session on h in dir (as seen on the host) with env as its
// whole environment.
func (h *Host) NewSession(dir string, env []string) (*Session, error) {
	sd := filepath.Join(h.root, "session")
	if err := os.MkdirAll(sd, 0o700); err != nil {
		return nil, err
	}
	s := &Session{host: h, dir: sd, env: env}
	if err := os.WriteFile(s.state(), []byte("cd "+shellQuote(dir)+"\n"), 0o600); err != nil {
		return nil, err
	}
	return s, os.WriteFile(filepath.Join(sd, "run.sh"), []byte(sessionScript), 0o600)
}

func (s *Session) state() string { return filepath.Join(s.dir, "state.sh") }

// Run runs script in the session and returns its combined output.
func (s *Session) Run(ctx context.Context, script string) ([]byte, error) {
	s.count++
	path := filepath.Join(s.dir, "script-"+strconv.Itoa(s.count)+".sh")
	if err := os.WriteFile(path, []byte(script), 0o600); err != nil {
		return nil, err
	}
	cmd := s.host.Command(ctx, "bash", filepath.Join(s.dir, "run.sh"), s.state(), path)
	cmd.Env = s.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("on %s: %w", s.host.name, err)
	}
	return out, nil
}

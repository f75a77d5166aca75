package agent

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/uuid"

	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

// InvalidCommandError lists what is wrong with a command, each problem naming its
// field as "command.<field>" (the field of RunCommandRequest it came in).
type InvalidCommandError struct {
	Problems []string
}

// Error returns the problems, separated by "; ".
func (e *InvalidCommandError) Error() string {
	return "invalid command: " + strings.Join(e.Problems, "; ")
}

// ValidateCommand returns an *InvalidCommandError listing every malformed field
// of cmd, or nil when the agent can run it.
func ValidateCommand(cmd *mantisv1.Command) error {
	if cmd == nil {
		return &InvalidCommandError{Problems: []string{"command: required"}}
	}
	var p []string
	add := func(field, format string, args ...any) {
		p = append(p, "command."+field+": "+fmt.Sprintf(format, args...))
	}
	if cmd.GetId() == "" {
		add("id", "required")
	} else if _, err := uuid.Parse(cmd.GetId()); err != nil {
		add("id", "must be a UUID, got %q", cmd.GetId())
	}
	if rid := cmd.GetDispatchRequestId(); rid != "" {
		if _, err := uuid.Parse(rid); err != nil {
			add("dispatch_request_id", "must be a UUID when set, got %q", rid)
		}
	}
	switch text := cmd.GetCommand(); {
	case strings.TrimSpace(text) == "":
		add("command", "required")
	case strings.ContainsRune(text, 0):
		add("command", "must not contain NUL bytes")
	}
	if cmd.Timeout != nil {
		if err := cmd.Timeout.CheckValid(); err != nil {
			add("timeout", "%v", err)
		} else if cmd.Timeout.AsDuration() <= 0 {
			add("timeout", "must be positive when set, got %s", cmd.Timeout.AsDuration())
		}
	}
	keys := make([]string, 0, len(cmd.GetEnv()))
	for k := range cmd.GetEnv() {
		keys = append(keys, k)
	}
	slices.Sort(keys) // the same request always reads the same
	for _, k := range keys {
		switch {
		case k == "":
			add("env", "names must not be empty")
		case strings.ContainsAny(k, "=\x00"):
			add("env", "name %q must not contain '=' or NUL", k)
		case strings.ContainsRune(cmd.GetEnv()[k], 0):
			add("env", "value of %s must not contain NUL", k)
		}
	}
	if dir := cmd.GetWorkingDir(); dir != "" && (!filepath.IsAbs(dir) || strings.ContainsRune(dir, 0)) {
		add("working_dir", "must be an absolute path, got %q", dir)
	}
	if len(p) > 0 {
		return &InvalidCommandError{Problems: p}
	}
	return nil
}

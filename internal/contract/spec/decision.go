package spec

import (
	"fmt"
	"regexp"
	"time"
)

// Step kinds: a command run on every target, or an approval that waits for a person.
const (
	// StepKindCommand is the default kind: the step runs its command on every target.
	StepKindCommand = "command"
	// StepKindApproval waits for an approve or reject decision, or its timeout, and
	// runs no command.
	StepKindApproval = "approval"
)

// What an approval step decides when nobody decided within its timeout.
const (
	OnTimeoutReject  = "reject"
	OnTimeoutApprove = "approve"
)

// OnFailureAsk is the on_failure of a command step that, when it fails, waits for a
// person to retry it on its failed targets, skip it, or abort the deployment.
const OnFailureAsk = "ask"

// Bounds of a human decision's inputs.
const (
	// DefaultApprovalTimeout is how long an approval step waits when it names no
	// timeout.
	DefaultApprovalTimeout = 24 * time.Hour
	// MaxApprovalTimeout caps an approval step's timeout.
	MaxApprovalTimeout = 30 * 24 * time.Hour
	// MaxApprovers caps a step's approvers.
	MaxApprovers = 100
	// approvalCommand is what an approval step records as its command: it runs none.
	approvalCommand = "(approval)"
)

// tokenNamePattern is an API token's name (internal/mandible/apitoken): 1-64 letters, digits,
// '-', '_', '.', '@'.
var tokenNamePattern = regexp.MustCompile(`^[A-Za-z0-9._@-]{1,64}$`)

// IsApproval reports whether the step waits for a person instead of running a command.
func (s Step) IsApproval() bool { return s.Kind == StepKindApproval }

// AsksOnFailure reports whether the step, when it fails, waits for a person's decision.
func (s Step) AsksOnFailure() bool { return s.OnFailure == OnFailureAsk }

// RecordedCommand is the command text a step's record holds: its command, or a marker
// for an approval step, which runs none.
func (s Step) RecordedCommand() string {
	if s.IsApproval() {
		return approvalCommand
	}
	return s.Command
}

// ApprovalTimeout is how long an approval step waits (call after WithDefaults).
func (s Step) ApprovalTimeout() time.Duration {
	d, err := time.ParseDuration(s.Timeout)
	if err != nil || d <= 0 {
		return DefaultApprovalTimeout
	}
	return d
}

// TimeoutDecision is what an approval step decides when it times out: OnTimeoutReject
// unless it says approve.
func (s Step) TimeoutDecision() string {
	if s.OnTimeout == OnTimeoutApprove {
		return OnTimeoutApprove
	}
	return OnTimeoutReject
}

// MayDecide reports whether the token named by may decide the step's wait: any token
// when the step names no approvers, else only those it names.
func (s Step) MayDecide(by string) bool {
	if len(s.Approvers) == 0 {
		return true
	}
	for _, a := range s.Approvers {
		if a == by {
			return true
		}
	}
	return false
}

// validateKind checks the fields of a step's kind and human decisions, naming each
// problem under at. It reports whether the step is an approval, whose command-only
// fields the caller then leaves unchecked.
func (s Step) validateKind(p *problems, at string) bool {
	switch s.Kind {
	case "", StepKindCommand, StepKindApproval:
	default:
		p.add(at+".kind", "must be command or approval, got %q", s.Kind)
	}
	switch s.OnFailure {
	case "", OnFailureAsk:
	default:
		p.add(at+".on_failure", "must be ask, got %q", s.OnFailure)
	}
	if s.OnFailure == OnFailureAsk && s.ContinueOnError {
		p.add(at+".on_failure", "on_failure: ask and continue_on_error contradict each other: a failed step either waits for a decision or goes on; set one")
	}
	s.validateApprovers(p, at)
	if !s.IsApproval() {
		if s.OnTimeout != "" {
			p.add(at+".on_timeout", "only an approval step (kind: approval) has on_timeout")
		}
		if len(s.Approvers) > 0 && !s.AsksOnFailure() {
			p.add(at+".approvers", "only an approval step or a step with on_failure: ask has approvers")
		}
		return false
	}
	s.validateApproval(p, at)
	return true
}

// validateApproval checks an approval step: no command, a timeout within
// MaxApprovalTimeout, and an on_timeout of reject or approve.
func (s Step) validateApproval(p *problems, at string) {
	if s.Command != "" {
		p.add(at+".command", "an approval step runs no command")
	}
	if s.OnFailure != "" {
		p.add(at+".on_failure", "an approval step has no on_failure: it is approved or rejected")
	}
	if s.ContinueOnError {
		p.add(at+".continue_on_error", "an approval step has no continue_on_error: a rejection fails the deployment")
	}
	if len(s.Env) > 0 || len(s.EnvSecret) > 0 || s.WorkingDir != "" {
		p.add(at, "an approval step runs no command, so it has no env, env_secret or working_dir")
	}
	if s.Rollout != nil {
		p.add(at+".rollout", "an approval step runs on no target, so it has no rollout")
	}
	switch s.OnTimeout {
	case "", OnTimeoutReject, OnTimeoutApprove:
	default:
		p.add(at+".on_timeout", "must be reject or approve, got %q", s.OnTimeout)
	}
	if s.Timeout != "" {
		if t, err := time.ParseDuration(s.Timeout); err != nil || t <= 0 {
			p.add(at+".timeout", "must be a positive duration like \"30m\" or \"24h\", got %q", s.Timeout)
		} else if t > MaxApprovalTimeout {
			p.add(at+".timeout", "an approval waits at most %s, got %s", MaxApprovalTimeout, t)
		}
	}
}

// validateApprovers checks the approvers' names: API token names, each once.
func (s Step) validateApprovers(p *problems, at string) {
	if len(s.Approvers) > MaxApprovers {
		p.add(at+".approvers", "at most %d, got %d", MaxApprovers, len(s.Approvers))
		return
	}
	seen := map[string]bool{}
	for i, a := range s.Approvers {
		field := fmt.Sprintf("%s.approvers[%d]", at, i)
		if !tokenNamePattern.MatchString(a) {
			p.add(field, "not an API token name (1-64 letters, digits, '-', '_', '.', '@'): %q", a)
		} else if seen[a] {
			p.add(field, "%q is listed twice", a)
		}
		seen[a] = true
	}
}

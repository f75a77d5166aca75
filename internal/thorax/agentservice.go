package thorax

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mantis-deploy/mantis/internal/identity"
	"github.com/mantis-deploy/mantis/internal/safetext"
	"github.com/mantis-deploy/mantis/internal/telemetry"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

// maxPollCommands is the largest max_commands a poll may ask for.
const maxPollCommands = 100

// Bounds on the free text an agent sends. Text beyond them is cut, not refused: a
// result must reach Mandible whatever its error says.
const (
	// maxAgentErrorBytes is how much of a result's error text is kept: its start.
	maxAgentErrorBytes = safetext.MaxErrorBytes
	// maxEchoBytes is how much of a refused value an error message quotes back.
	maxEchoBytes = 160
)

// echo quotes a value the agent sent for an error message, bounded and as valid text.
func echo(v string) string {
	return strconv.Quote(safetext.Bound(v, maxEchoBytes))
}

// boundResult cuts the free text of an agent's result to what is stored: the error
// to maxAgentErrorBytes, the output to its last maxResultOutput bytes.
func boundResult(r *mantisv1.CommandResult) {
	r.Error = safetext.Bound(r.GetError(), maxAgentErrorBytes)
	if out := r.GetOutput(); len(out) > maxResultOutput {
		r.Output, r.OutputTruncated = safetext.Tail(out, maxResultOutput), true
	}
}

// targetPattern is what Mandible accepts as a target name. A poll target
// outside it would make Mandible refuse the heartbeat that reports it, so it
// is refused here, at the agent.
var targetPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

func checkTarget(target string) error {
	switch {
	case target == "":
		return status.Error(codes.InvalidArgument, "target: required")
	case !targetPattern.MatchString(target):
		return status.Errorf(codes.InvalidArgument, "target: must match %s, got %s", targetPattern, echo(target))
	}
	return nil
}

// agentService is mantisv1.ThoraxService, served to poll-mode agents on
// agents.listen.
type agentService struct {
	mantisv1.UnimplementedThoraxServiceServer
	t *Thorax
}

// newAgentGuard returns the guard of the agents server: only the agent role may
// call it.
func newAgentGuard(logger *slog.Logger, metrics *identity.Metrics) *identity.Guard {
	return &identity.Guard{
		Link: identity.LinkThoraxAgents, Allow: []identity.Role{identity.RoleAgent},
		Logger: logger, Metrics: metrics,
	}
}

// authorizeTarget refuses a call for a target other than the caller's own: an
// agent's certificate names its target, and it polls and reports for that
// target only. Without identities (agents.insecure) every target is admitted.
func (s *agentService) authorizeTarget(ctx context.Context, target string) error {
	caller, ok := identity.FromContext(ctx)
	if !ok || caller.Name == target {
		return nil
	}
	return s.t.agentGuard.RefuseBinding(ctx, identity.BindingTarget, caller,
		fmt.Sprintf("target %s requires certificate agent/%s, certificate presents %s", echo(target), target, caller))
}

// PollCommands answers with the target's queued commands as soon as there
// are any, or empty after wait (capped at 60 s). A draining instance answers
// UNAVAILABLE at once, so the agent backs off and polls again, reaching
// another instance or this one restarted, instead of spinning on empty
// answers. The first poll of a target that was not connected triggers a
// fetch, so its commands are claimed without waiting for the polling tick.
func (s *agentService) PollCommands(ctx context.Context, req *mantisv1.PollCommandsRequest) (*mantisv1.PollCommandsResponse, error) {
	if err := checkTarget(req.GetTarget()); err != nil {
		return nil, err
	}
	if err := s.authorizeTarget(ctx, req.GetTarget()); err != nil {
		return nil, err
	}
	if n := req.GetMaxCommands(); n < 1 || n > maxPollCommands {
		return nil, status.Errorf(codes.InvalidArgument, "max_commands: must be 1-%d, got %d", maxPollCommands, n)
	}
	var wait time.Duration
	if req.GetWait() != nil {
		if err := req.GetWait().CheckValid(); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "wait: %v", err)
		}
		wait = req.GetWait().AsDuration()
		if wait < 0 {
			return nil, status.Errorf(codes.InvalidArgument, "wait: must not be negative, got %s", wait)
		}
		wait = min(wait, maxPollWait)
	}

	held, err := heldNames(req)
	if err != nil {
		return nil, err
	}

	t := s.t
	target := req.GetTarget()
	if t.book.beginPoll(target, 3*max(wait, t.pollWindowFloor), time.Now()) {
		t.logger.InfoContext(ctx, "poll agent connected", "target", target)
		t.wakeFetch()
	}
	defer func() { t.book.endPoll(target, time.Now()) }()
	rehanded, release := t.book.rehandLost(target, req.GetSession(), held)
	if rehanded+len(release) > 0 {
		t.logger.InfoContext(ctx, "poll agent does not hold commands handed to it: the answer never reached it; handing them again",
			"target", target, "commands", rehanded+len(release))
		t.metrics.rehandedCommands(rehanded)
		t.release(t.workContext(ctx), release, "handed to a poll agent that never received them, while draining")
	}

	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		taken, cancels, wake, draining := t.book.takePoll(target, req.GetSession(), int(req.GetMaxCommands()), func(c *mantisv1.Command) time.Time {
			return time.Now().Add(t.resultWait(c))
		})
		if len(taken) > 0 || len(cancels) > 0 {
			if ctx.Err() != nil {
				// The agent left before it could hear of them.
				t.release(t.workContext(ctx), t.book.unhand(taken), "poll agent left while draining")
				t.book.recancel(target, cancels)
				return nil, status.FromContextError(ctx.Err()).Err()
			}
			cmds := make([]*mantisv1.Command, len(taken))
			for i, h := range taken {
				_, span, cmd := startHandoff(ctx, h.cmd)
				cmds[i] = cmd
				span.End()
			}
			t.logger.DebugContext(ctx, "handed commands to poll agent", "target", target, "commands", len(cmds), "cancels", len(cancels))
			return &mantisv1.PollCommandsResponse{Commands: cmds, CancelCommandIds: cancels}, nil
		}
		if draining {
			return nil, status.Error(codes.Unavailable, "thorax is draining: poll again later")
		}
		select {
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		case <-timer.C:
			return &mantisv1.PollCommandsResponse{}, nil
		case <-wake:
		}
	}
}

// maxHeldNames is the most command ids a poll may name in held_command_ids.
const maxHeldNames = 1024

// sessionPattern is what a poll's session may be.
var sessionPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// heldNames checks a poll's session and held_command_ids and returns the ids as
// a set when names_held says they are complete, or nil.
func heldNames(req *mantisv1.PollCommandsRequest) (map[string]bool, error) {
	switch session := req.GetSession(); {
	case session == "" && req.GetNamesHeld():
		return nil, status.Error(codes.InvalidArgument, "session: required with names_held")
	case session != "" && !sessionPattern.MatchString(session):
		return nil, status.Errorf(codes.InvalidArgument, "session: must match %s, got %s", sessionPattern, echo(session))
	}
	ids := req.GetHeldCommandIds()
	if len(ids) > maxHeldNames {
		return nil, status.Errorf(codes.InvalidArgument, "held_command_ids: at most %d ids, got %d", maxHeldNames, len(ids))
	}
	for i, id := range ids {
		if _, err := uuid.Parse(id); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "held_command_ids[%d]: must be a UUID, got %s", i, echo(id))
		}
	}
	if !req.GetNamesHeld() {
		return nil, nil
	}
	held := make(map[string]bool, len(ids))
	for _, id := range ids {
		held[id] = true
	}
	return held, nil
}

// ReportResult stores the result of a command the reporting target's agent
// took, and answers once Mandible has it (see resultAnswer). A command this
// instance does not hold (another instance handed it out, or this one did
// before it restarted or registered again) is forwarded with the lease epoch
// the agent received: Mandible records it while that epoch is current.
// Reporting the same command again while its result is being stored waits
// for the same answer.
func (s *agentService) ReportResult(ctx context.Context, req *mantisv1.ReportResultRequest) (*mantisv1.ReportResultResponse, error) {
	if err := checkReport(req); err != nil {
		return nil, err
	}
	if err := s.authorizeTarget(ctx, req.GetTarget()); err != nil {
		return nil, err
	}
	boundResult(req.GetResult())
	t := s.t
	h, err := t.book.beginReport(req.GetTarget(), req.GetCommandId())
	if errors.Is(err, errNotHeld) {
		if req.GetLeaseEpoch() < 1 {
			return nil, status.Errorf(codes.NotFound, "command_id: command %s is not held by this thorax instance, and the report carries no lease_epoch to forward it with", req.GetCommandId())
		}
		t.logger.InfoContext(ctx, "forwarding the result of a command this instance does not hold",
			"command_id", req.GetCommandId(), "target", req.GetTarget(), "lease_epoch", req.GetLeaseEpoch())
		h, err = t.book.beginForward(req.GetTarget(), req.GetCommandId(), req.GetLeaseEpoch())
	}
	switch {
	case errors.Is(err, errReportedOnce):
		if err := resultAnswer(req.GetCommandId(), waitStored(ctx, h)); err != nil {
			return nil, err
		}
		return &mantisv1.ReportResultResponse{}, nil
	case errors.Is(err, errOtherTarget):
		return nil, status.Errorf(codes.FailedPrecondition, "command_id: command %s is not a poll command of target %s", req.GetCommandId(), req.GetTarget())
	case errors.Is(err, errNotHanded):
		return nil, status.Errorf(codes.FailedPrecondition, "command_id: command %s was not handed to an agent yet", req.GetCommandId())
	case err != nil:
		return nil, status.Errorf(codes.Internal, "command_id: %v", err)
	}
	defer t.book.finish(h)
	// The store outlives the agent's call: the result must reach Mandible
	// even if the agent hangs up.
	err = t.storeResult(telemetry.Follow(t.workContext(ctx), ctx), h, req.GetResult())
	t.book.endStore(h, err)
	if err := resultAnswer(req.GetCommandId(), err); err != nil {
		return nil, err
	}
	return &mantisv1.ReportResultResponse{}, nil
}

// checkReport checks the fields of a result report.
func checkReport(req *mantisv1.ReportResultRequest) error {
	if err := checkTarget(req.GetTarget()); err != nil {
		return err
	}
	if req.GetCommandId() == "" {
		return status.Error(codes.InvalidArgument, "command_id: required")
	}
	if _, err := uuid.Parse(req.GetCommandId()); err != nil {
		return status.Errorf(codes.InvalidArgument, "command_id: must be a UUID, got %s", echo(req.GetCommandId()))
	}
	if req.GetLeaseEpoch() < 0 {
		return status.Errorf(codes.InvalidArgument, "lease_epoch: must not be negative, got %d", req.GetLeaseEpoch())
	}
	if req.GetResult() == nil {
		return status.Error(codes.InvalidArgument, "result: required")
	}
	return nil
}

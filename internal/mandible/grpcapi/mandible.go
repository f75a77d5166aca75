// Package grpcapi is Mandible's gRPC service for Thorax instances
// (mantis.v1.MandibleService): registration, heartbeats, the fenced command claim and
// result store, and redispatch requests.
package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/internal/identity"
	"github.com/mantis-deploy/mantis/internal/rpc"
	"github.com/mantis-deploy/mantis/internal/safetext"
	"github.com/mantis-deploy/mantis/internal/secretenv"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
	"github.com/mantis-deploy/mantis/schema"
)

// Limits on what a Thorax may send. Free text (output, error, reasons) beyond them is
// cut, not refused: a result must never be lost because it says too much.
const (
	maxNameLen  = 128
	maxCommands = 1000
	// maxOutputBytes is how much of a result's output is kept: its end.
	maxOutputBytes = schema.MaxRawOutputBytes
	// maxErrorBytes is how much of a result's error text is kept: its start.
	maxErrorBytes = safetext.MaxErrorBytes
	// maxReasonBytes is how much of a redispatch reason is kept: its start.
	maxReasonBytes = safetext.MaxReasonBytes
)

// MandibleService implements mantisv1.MandibleServiceServer over PostgreSQL.
type MandibleService struct {
	mantisv1.UnimplementedMandibleServiceServer
	DB               *pgxpool.Pool
	Logger           *slog.Logger
	HeartbeatTimeout time.Duration
	// ReplicaID names this replica in the heartbeats it records.
	ReplicaID string
	// Guard admits callers by role (NewGuard) and refuses a call naming an
	// instance registered by another certificate; nil on a plaintext
	// development server, where there are no identities.
	Guard *identity.Guard
	// Secrets opens the sealed env_secret values of the commands Thorax fetches (the
	// codec keyring); nil fails every command that has one.
	Secrets secretenv.Keyring
	// SecretResolver resolves the file: and env: references among them.
	SecretResolver secretenv.Resolver
	// MaxOutputBytesPerCommand bounds the live output stored per command
	// (output.max_bytes_per_command); zero means schema.DefaultMaxOutputBytesPerCommand.
	MaxOutputBytesPerCommand int64
	// ScopeOf returns which targets the Thorax certificate named cert may serve, and
	// false when it may serve every target (thorax.scopes); nil scopes nothing.
	ScopeOf func(cert string) (schema.InstanceScope, bool)

	// bound caches instance id -> certificate name; a binding never changes.
	bound sync.Map
	// results groups concurrent StoreCommandResult calls (results.go).
	results resultBatch
}

// invalid is an INVALID_ARGUMENT error naming the field.
func invalid(field, format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, "%s: %s", field, fmt.Sprintf(format, args...))
}

func parseID(field, v string) (uuid.UUID, error) {
	if v == "" {
		return uuid.Nil, invalid(field, "required")
	}
	id, err := uuid.Parse(v)
	if err != nil {
		return uuid.Nil, invalid(field, "must be a UUID, got %q", v)
	}
	return id, nil
}

// toStatus maps the schema's errors to gRPC codes at the boundary.
func (s *MandibleService) toStatus(ctx context.Context, op string, err error) error {
	var inputErr *domain.InputError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, schema.ErrInstanceDead):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, schema.ErrNotHeld):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, schema.ErrNotFound):
		return status.Error(codes.NotFound, op+": not found")
	case errors.As(err, &inputErr):
		return status.Error(codes.InvalidArgument, inputErr.Problems.String())
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	}
	s.Logger.ErrorContext(ctx, "rpc failed", "op", op, "err", err)
	return status.Error(codes.Internal, op+" failed; see the Mandible log")
}

// RegisterInstance issues an instance id for a starting Thorax.
func (s *MandibleService) RegisterInstance(ctx context.Context, req *mantisv1.RegisterInstanceRequest) (*mantisv1.RegisterInstanceResponse, error) {
	name := strings.TrimSpace(req.GetName())
	if name == "" || len(name) > maxNameLen || strings.ContainsFunc(name, unicode.IsControl) {
		return nil, invalid("name", "required, at most %d characters, no control characters", maxNameLen)
	}
	in := schema.NewInstance{Name: name, Version: safetext.Bound(req.GetVersion(), maxNameLen)}
	caller, identified := identity.FromContext(ctx)
	if identified {
		in.CertName = caller.Name
		if scope, scoped := s.scopeOf(caller.Name); scoped {
			in.Scope = &scope
		}
	}
	id, err := schema.RegisterInstance(ctx, s.DB, in)
	if err != nil {
		return nil, s.toStatus(ctx, "RegisterInstance", err)
	}
	if identified {
		// A binding never changes: later calls naming id are checked against it.
		s.bound.Store(id, caller.Name)
		if name != caller.Name {
			s.Logger.WarnContext(ctx, "thorax instance registered under a name other than its certificate's",
				"instance_id", id, "name", name, "cert_name", caller.Name)
		}
	}
	s.Logger.InfoContext(ctx, "registered thorax instance", "instance_id", id, "name", name, "cert_name", in.CertName, "scoped", in.Scope != nil)
	return &mantisv1.RegisterInstanceResponse{InstanceId: id.String(), HeartbeatTimeout: durationpb.New(s.HeartbeatTimeout)}, nil
}

// Heartbeat keeps the instance live and records its poll-mode targets.
func (s *MandibleService) Heartbeat(ctx context.Context, req *mantisv1.HeartbeatRequest) (*mantisv1.HeartbeatResponse, error) {
	id, err := parseID("instance_id", req.GetInstanceId())
	if err != nil {
		return nil, err
	}
	if err := s.authorizeInstance(ctx, id); err != nil {
		return nil, err
	}
	reply, err := schema.Heartbeat(ctx, s.DB, schema.HeartbeatRequest{
		Instance: id, Replica: s.ReplicaID, PollTargets: req.GetPollTargets(), Draining: req.GetDraining(),
	})
	if err != nil {
		return nil, s.toStatus(ctx, "Heartbeat", err)
	}
	resp := &mantisv1.HeartbeatResponse{ListenTargets: reply.ListenTargets}
	for _, c := range reply.Cancelled {
		resp.CancelledCommandIds = append(resp.CancelledCommandIds, c.String())
	}
	return resp, nil
}

// FetchPendingCommands claims queued commands for the instance.
func (s *MandibleService) FetchPendingCommands(ctx context.Context, req *mantisv1.FetchPendingCommandsRequest) (*mantisv1.FetchPendingCommandsResponse, error) {
	id, err := parseID("instance_id", req.GetInstanceId())
	if err != nil {
		return nil, err
	}
	if err := s.authorizeInstance(ctx, id); err != nil {
		return nil, err
	}
	n := req.GetMaxCommands()
	if n < 1 || n > maxCommands {
		return nil, invalid("max_commands", "must be 1-%d, got %d", maxCommands, n)
	}
	// The names are matched and stored as text: refuse what no target can be called
	// (a NUL byte would otherwise fail the query, an INTERNAL error for bad input).
	for i, name := range req.GetPollTargets() {
		if err := (schema.NewTarget{Name: name, Mode: schema.ModePoll}).Validate(); err != nil {
			return nil, invalid(fmt.Sprintf("poll_targets[%d]", i), "%q is not a valid target name", name)
		}
	}
	ids := make([]uuid.UUID, 0, len(req.GetCommandIds()))
	for i, v := range req.GetCommandIds() {
		cid, err := parseID(fmt.Sprintf("command_ids[%d]", i), v)
		if err != nil {
			return nil, err
		}
		ids = append(ids, cid)
	}
	cmds, err := schema.FetchPendingCommands(ctx, s.DB, schema.FetchCommandsRequest{
		InstanceID: id, PollTargets: req.GetPollTargets(), Max: int(n), CommandIDs: ids,
		MaxBytes: rpc.FetchAnswerBytes,
	})
	if err != nil {
		return nil, s.toStatus(ctx, "FetchPendingCommands", err)
	}
	return &mantisv1.FetchPendingCommandsResponse{Commands: s.fitAnswer(ctx, id, s.openSecrets(ctx, id, cmds))}, nil
}

// maxAnswerBytes bounds a FetchPendingCommands answer once its secrets are open,
// leaving room under rpc.MaxMessageBytes for the message's framing.
const maxAnswerBytes = rpc.MaxMessageBytes - 64<<10

// fitAnswer returns the commands that fit one answer. The claim bounded them by their
// stored size; secrets opened from files can make them larger, and what would not
// fit goes back to the queue rather than into an answer Thorax would refuse after the
// claim has committed. The first command is always sent.
func (s *MandibleService) fitAnswer(ctx context.Context, instance uuid.UUID, cmds []*mantisv1.Command) []*mantisv1.Command {
	size := 0
	for i, c := range cmds {
		if size += protowire.SizeBytes(proto.Size(c)); i > 0 && size > maxAnswerBytes {
			s.release(ctx, instance, cmds[i:])
			return cmds[:i]
		}
	}
	return cmds
}

// release hands claimed commands that did not fit an answer back to the queue.
func (s *MandibleService) release(ctx context.Context, instance uuid.UUID, cmds []*mantisv1.Command) {
	leases := make([]schema.CommandLease, 0, len(cmds))
	for _, c := range cmds {
		if id, err := uuid.Parse(c.GetId()); err == nil {
			leases = append(leases, schema.CommandLease{ID: id, Epoch: c.GetLeaseEpoch()})
		}
	}
	n, err := schema.ReleaseCommands(ctx, s.DB, instance, leases)
	if err != nil {
		// They stay held by this instance, unknown to it: the settle loop fails them
		// past their timeout and grace.
		s.Logger.ErrorContext(ctx, "handing back commands that did not fit the fetch answer", "instance_id", instance, "commands", len(cmds), "err", err)
		return
	}
	s.Logger.WarnContext(ctx, "handed back commands that did not fit the fetch answer", "instance_id", instance, "released", n, "max_bytes", maxAnswerBytes)
}

func commandToProto(c schema.Command) *mantisv1.Command {
	pc := &mantisv1.Command{
		Id: c.ID.String(), Target: c.Target, Mode: c.Mode, Command: c.Command, Timeout: durationpb.New(c.Timeout),
		Priority: c.Priority, LeaseEpoch: c.LeaseEpoch, Env: c.Env, WorkingDir: c.WorkingDir,
		ListenAddress: c.ListenAddress, MaxRetries: int32(c.MaxRetries), DispatchRequestId: c.DispatchRequestID.String(),
		TraceParent: c.TraceParent,
	}
	if c.DeploymentID != nil {
		pc.DeploymentId = c.DeploymentID.String()
	}
	if c.StepPosition != nil {
		pc.StepPosition = int32(*c.StepPosition)
	}
	return pc
}

// StoreCommandResult records a result, fenced by its lease epoch and by its sender:
// the instance holding the command, or one forwarding it for the command's own target
// (req.target, the reporting agent's certificate name as Thorax read it). Any other
// caller is PERMISSION_DENIED, logged and counted as a refusal of what it names; a
// stale epoch is FAILED_PRECONDITION and says so, naming no epoch. Concurrent calls
// are stored together, one statement per batch (results.go); each still gets its own
// answer.
func (s *MandibleService) StoreCommandResult(ctx context.Context, req *mantisv1.StoreCommandResultRequest) (*mantisv1.StoreCommandResultResponse, error) {
	id, err := parseID("instance_id", req.GetInstanceId())
	if err != nil {
		return nil, err
	}
	if err := s.authorizeInstance(ctx, id); err != nil {
		return nil, err
	}
	cmd, err := parseID("command_id", req.GetCommandId())
	if err != nil {
		return nil, err
	}
	if req.GetLeaseEpoch() < 1 {
		return nil, invalid("lease_epoch", "must be positive, got %d", req.GetLeaseEpoch())
	}
	if t := req.GetTarget(); t != "" {
		if err := (schema.NewTarget{Name: t, Mode: schema.ModePoll}).Validate(); err != nil {
			return nil, invalid("target", "%q is not a valid target name", safetext.Bound(t, maxNameLen))
		}
	}
	r := req.GetResult()
	if r == nil {
		return nil, invalid("result", "required")
	}
	if err := s.authorizeScope(ctx, id, cmd, req.GetTarget()); err != nil {
		return nil, err
	}
	// Any bytes are accepted; only their amount is bounded, keeping the end.
	output, truncated := r.GetOutput(), r.GetOutputTruncated()
	if len(output) > maxOutputBytes {
		output, truncated = safetext.Tail(output, maxOutputBytes), true
	}
	if r.GetStartedAt() != nil && !r.GetStartedAt().IsValid() {
		return nil, invalid("result.started_at", "not a valid timestamp")
	}
	if r.GetFinishedAt() != nil && !r.GetFinishedAt().IsValid() {
		return nil, invalid("result.finished_at", "not a valid timestamp")
	}
	stored, err := s.results.batcher(s.DB).Store(ctx, schema.ResultToStore{Instance: id, Command: cmd, Epoch: req.GetLeaseEpoch(), Target: req.GetTarget(), Result: schema.CommandResult{
		ExitCode: int(r.GetExitCode()), Output: string(output), OutputTruncated: truncated,
		TimedOut: r.GetTimedOut(), Cancelled: r.GetCancelled(), Error: safetext.Bound(r.GetError(), maxErrorBytes),
		StartedAt: timeOf(r.GetStartedAt()), FinishedAt: timeOf(r.GetFinishedAt()),
	}})
	if errors.Is(err, schema.ErrNotOwn) {
		return nil, s.refuseNotOwn(ctx, err)
	}
	if err != nil {
		if errors.Is(err, schema.ErrNotHeld) {
			s.Logger.WarnContext(ctx, "refused command result", "instance_id", id, "command_id", cmd, "lease_epoch", req.GetLeaseEpoch(), "err", err)
		}
		return nil, s.toStatus(ctx, "StoreCommandResult", err)
	}
	if !stored.Replayed {
		s.Logger.DebugContext(ctx, "stored command result", "instance_id", id, "command_id", cmd, "lease_epoch", req.GetLeaseEpoch(), "status", stored.Status)
	}
	return &mantisv1.StoreCommandResultResponse{}, nil
}

func timeOf(ts *timestamppb.Timestamp) time.Time {
	if ts == nil {
		return time.Time{}
	}
	return ts.AsTime()
}

// ScheduleRedispatch asks for another dispatch of a held command, or, at lease epoch
// schema.UnclaimedLeaseEpoch, of a queued command whose nudge failed for good before
// any claim. Mandible owns the budget and may refuse; a call its fencing refuses is
// FAILED_PRECONDITION saying why.
func (s *MandibleService) ScheduleRedispatch(ctx context.Context, req *mantisv1.ScheduleRedispatchRequest) (*mantisv1.ScheduleRedispatchResponse, error) {
	id, err := parseID("instance_id", req.GetInstanceId())
	if err != nil {
		return nil, err
	}
	if err := s.authorizeInstance(ctx, id); err != nil {
		return nil, err
	}
	cmd, err := parseID("command_id", req.GetCommandId())
	if err != nil {
		return nil, err
	}
	reason := safetext.Bound(req.GetReason(), maxReasonBytes)
	if req.GetLeaseEpoch() < 0 {
		return nil, invalid("lease_epoch", "must not be negative, got %d", req.GetLeaseEpoch())
	}
	res, err := schema.ScheduleRedispatch(ctx, s.DB, id, cmd, req.GetLeaseEpoch(), reason)
	if err != nil {
		if errors.Is(err, schema.ErrNotHeld) {
			s.Logger.DebugContext(ctx, "refused redispatch", "instance_id", id, "command_id", cmd, "lease_epoch", req.GetLeaseEpoch(), "err", err)
		}
		return nil, s.toStatus(ctx, "ScheduleRedispatch", err)
	}
	s.Logger.InfoContext(ctx, "redispatch decided", "instance_id", id, "command_id", cmd, "lease_epoch", req.GetLeaseEpoch(),
		"request_id", res.RequestID, "outcome", res.Outcome)
	switch res.Outcome {
	case domain.OutcomeRetry:
		return &mantisv1.ScheduleRedispatchResponse{Scheduled: true, NextAttemptAt: timestamppb.New(*res.NextAttemptAt)}, nil
	case domain.OutcomeExpired:
		return &mantisv1.ScheduleRedispatchResponse{Refusal: "the dispatch request expired " + domain.DispatchRequestTTLText + " after creation"}, nil
	case schema.OutcomeBudgetSpent:
		return &mantisv1.ScheduleRedispatchResponse{Refusal: fmt.Sprintf(
			"the retry budget is spent (this is delivery %d of %d): the command stays queued for polling to claim until delivery_timeout",
			domain.MaxDispatchDeliveries, domain.MaxDispatchDeliveries)}, nil
	default:
		return &mantisv1.ScheduleRedispatchResponse{Refusal: fmt.Sprintf(
			"the retry budget is spent (%d retries after the first delivery, %d deliveries in all); the request failed",
			domain.MaxDispatchRetries, domain.MaxDispatchDeliveries)}, nil
	}
}

// ReleaseCommands hands held commands back to the queue.
func (s *MandibleService) ReleaseCommands(ctx context.Context, req *mantisv1.ReleaseCommandsRequest) (*mantisv1.ReleaseCommandsResponse, error) {
	id, err := parseID("instance_id", req.GetInstanceId())
	if err != nil {
		return nil, err
	}
	if err := s.authorizeInstance(ctx, id); err != nil {
		return nil, err
	}
	leases := make([]schema.CommandLease, 0, len(req.GetCommands()))
	for i, l := range req.GetCommands() {
		cid, err := parseID(fmt.Sprintf("commands[%d].command_id", i), l.GetCommandId())
		if err != nil {
			return nil, err
		}
		leases = append(leases, schema.CommandLease{ID: cid, Epoch: l.GetLeaseEpoch()})
	}
	n, err := schema.ReleaseCommands(ctx, s.DB, id, leases)
	if err != nil {
		return nil, s.toStatus(ctx, "ReleaseCommands", err)
	}
	return &mantisv1.ReleaseCommandsResponse{Released: int32(n)}, nil
}

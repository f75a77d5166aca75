package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/mantis-deploy/mantis/internal/agent/journal"
	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/identity"
	"github.com/mantis-deploy/mantis/internal/rpc"
	"github.com/mantis-deploy/mantis/internal/telemetry"
	"github.com/mantis-deploy/mantis/internal/tlsconf"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

// Server is the listen-mode agent's AgentService: Thorax calls it to run and
// cancel commands on this host.
type Server struct {
	mantisv1.UnimplementedAgentServiceServer
	// target is the agent's own name: it runs only commands for that target.
	target string
	runner *Runner
	logger *slog.Logger
	// Metrics counts the calls refused for their caller's role; nil counts
	// nothing.
	Metrics *identity.Metrics
	// hub keeps the runs' live output for WatchOutput.
	hub *outputHub
}

// NewServer returns the AgentService of the agent of target (its configured
// name): it runs on runner the commands for that target only, and makes itself
// the sink of runner's live output (WatchOutput).
func NewServer(target string, runner *Runner, logger *slog.Logger) *Server {
	hub := newOutputHub()
	runner.output = hub
	return &Server{target: target, runner: runner, logger: logger, hub: hub}
}

// RunCommand runs the command's dispatch request and answers with its result
// once it is over; a request that ran, or is running, is not run again: the
// call gets its stored result, or waits for the run under way. The run is not
// tied to the call: if Thorax goes away, the command goes on within its
// timeout, and its result is kept for when Thorax asks again.
//
// A command for another target is refused with PermissionDenied naming both
// targets, logged and counted in Metrics: whoever holds a Thorax certificate,
// or a Thorax calling a stale or mistyped address, cannot run another target's
// command on this host.
func (s *Server) RunCommand(ctx context.Context, req *mantisv1.RunCommandRequest) (*mantisv1.RunCommandResponse, error) {
	if err := ValidateCommand(req.GetCommand()); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if target := req.GetCommand().GetTarget(); target != s.target {
		return nil, s.refuseTarget(ctx, req.GetCommand().GetId(), target)
	}
	run, err := s.runner.Start(context.WithoutCancel(ctx), req.GetCommand())
	if err != nil {
		var invalid *InvalidCommandError
		switch {
		case errors.As(err, &invalid):
			return nil, status.Error(codes.InvalidArgument, err.Error())
		case errors.Is(err, ErrBusy):
			return nil, status.Error(codes.ResourceExhausted, err.Error())
		case errors.Is(err, ErrStopping), errors.Is(err, journal.ErrUnavailable):
			return nil, status.Error(codes.Unavailable, err.Error())
		default:
			return nil, status.Error(codes.Internal, err.Error())
		}
	}
	res, err := run.Wait(ctx)
	if err != nil {
		return nil, status.FromContextError(err).Err()
	}
	return &mantisv1.RunCommandResponse{Result: res}, nil
}

// refuseTarget logs, counts and returns the refusal of command id, which names
// target rather than this agent's own.
func (s *Server) refuseTarget(ctx context.Context, id, target string) error {
	caller, _ := identity.FromContext(ctx) // none on a plaintext link
	guard := &identity.Guard{Link: identity.LinkListenAgent, Logger: s.logger, Metrics: s.Metrics}
	return guard.RefuseBinding(ctx, identity.BindingTarget, caller,
		fmt.Sprintf("command %s is for target %q, this agent serves target %q", id, target, s.target))
}

// CancelCommand kills the named running command's process group.
func (s *Server) CancelCommand(ctx context.Context, req *mantisv1.CancelCommandRequest) (*mantisv1.CancelCommandResponse, error) {
	if req.GetCommandId() == "" {
		return nil, status.Error(codes.InvalidArgument, "command_id: required")
	}
	if !s.runner.Cancel(req.GetCommandId()) {
		return nil, status.Errorf(codes.NotFound, "command %s: not running", req.GetCommandId())
	}
	s.logger.InfoContext(ctx, "command cancelled", "command_id", req.GetCommandId())
	return &mantisv1.CancelCommandResponse{}, nil
}

// ListenCredentials returns the transport security of the listen section:
// mutual TLS that accepts only a client certificate signed by
// listen.ca_cert_path and, when listen.allowed_client_names is set, naming one
// of them; or plaintext when listen.insecure is set. The role is checked per
// call (NewGRPCServer). A handshake refused by name goes to refused (log and count
// it with identity.HandshakeRefusals).
func ListenCredentials(cfg config.AgentListen, refused ...tlsconf.RefusalHook) (credentials.TransportCredentials, error) {
	if cfg.Insecure {
		return insecure.NewCredentials(), nil
	}
	tc, err := tlsconf.Server(tlsconf.Files{CA: cfg.CACertPath, Cert: cfg.CertPath, Key: cfg.KeyPath})
	if err != nil {
		return nil, err
	}
	if len(cfg.AllowedClientNames) > 0 {
		tlsconf.RequirePeerNames(tc, cfg.AllowedClientNames, refused...)
	}
	return credentials.NewTLS(tc), nil
}

// insecureProtocol is what plaintext credentials report as their protocol.
const insecureProtocol = "insecure"

// NewGRPCServer returns a gRPC server that serves srv over creds. Over TLS only
// the thorax role may call it: another agent's certificate, or a CLI's, is
// refused with PermissionDenied, logged and counted in srv.Metrics. Plaintext
// (listen.insecure, development only) has no identities to check.
func NewGRPCServer(srv *Server, creds credentials.TransportCredentials) *grpc.Server {
	var guarded []grpc.ServerOption
	if creds.Info().SecurityProtocol != insecureProtocol {
		guard := &identity.Guard{
			Link: identity.LinkListenAgent, Allow: []identity.Role{identity.RoleThorax},
			Logger: srv.logger, Metrics: srv.Metrics,
		}
		guarded = guard.ServerOptions()
	}
	// The metrics interceptors are outermost, so that refused calls are counted too.
	gs := grpc.NewServer(append(slices.Concat(srv.runner.metrics.serverOptions(), guarded, rpc.ServerOptions()),
		grpc.Creds(creds),
		telemetry.GRPCServerOption(),
		// A Thorax that vanished without closing its connection is noticed
		// within a couple of minutes, and the commands it was waiting on are
		// killed rather than left to run for nobody.
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: time.Minute, Timeout: 20 * time.Second}),
		// Thorax may ping its long calls to keep them alive through middleboxes.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
	)...)
	mantisv1.RegisterAgentServiceServer(gs, srv)
	return gs
}

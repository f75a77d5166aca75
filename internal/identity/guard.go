package identity

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Links name the servers that check identities, as the refusal metric and log
// label them.
const (
	// LinkMandibleGRPC is Mandible's gRPC service for Thorax.
	LinkMandibleGRPC = "mandible_grpc"
	// LinkThoraxAgents is Thorax's service for poll-mode agents.
	LinkThoraxAgents = "thorax_agents"
	// LinkListenAgent is a listen-mode agent's service for Thorax.
	LinkListenAgent = "listen_agent"
)

// Presented values of a refusal that are not a role.
const (
	// presentedNone is a certificate without a Mantis identity, or no
	// certificate at all.
	presentedNone = "none"
)

// healthPrefix is the gRPC health service: it carries no data, so any peer the
// TLS handshake admitted may ask it.
const healthPrefix = "/grpc.health.v1.Health/"

// Guard admits to a gRPC server only the peers whose certificate presents one of
// the allowed roles, and puts their identity in the call's context. Install it
// only on a TLS server that verifies client certificates.
type Guard struct {
	// Link names the server in logs and metrics.
	Link string
	// Allow are the roles admitted.
	Allow   []Role
	Logger  *slog.Logger
	Metrics *Metrics
}

// ServerOptions returns the unary and stream interceptors of the guard.
func (g *Guard) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(g.Unary), grpc.ChainStreamInterceptor(g.Stream)}
}

// Unary is the guard as a unary interceptor.
func (g *Guard) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if strings.HasPrefix(info.FullMethod, healthPrefix) {
		return handler(ctx, req)
	}
	ctx, err := g.admit(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

// Stream is the guard as a stream interceptor.
func (g *Guard) Stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if strings.HasPrefix(info.FullMethod, healthPrefix) {
		return handler(srv, ss)
	}
	ctx, err := g.admit(ss.Context(), info.FullMethod)
	if err != nil {
		return err
	}
	return handler(srv, &identifiedStream{ServerStream: ss, ctx: ctx})
}

type identifiedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *identifiedStream) Context() context.Context { return s.ctx }

// admit returns ctx with the peer's identity, or the PermissionDenied refusal.
func (g *Guard) admit(ctx context.Context, method string) (context.Context, error) {
	expected := g.expected()
	cert := peerCertificate(ctx)
	if cert == nil {
		return nil, g.refuse(ctx, method, expected, presentedNone,
			fmt.Sprintf("%s role required, the call presents no verified certificate", expected))
	}
	id, err := FromCertificate(cert)
	if err != nil {
		return nil, g.refuse(ctx, method, expected, presentedNone,
			fmt.Sprintf("%s role required, certificate %q presents no identity: %v", expected, cert.Subject.CommonName, err))
	}
	if !slices.Contains(g.Allow, id.Role) {
		return nil, g.refuse(ctx, method, expected, string(id.Role),
			fmt.Sprintf("%s role required, certificate presents %s", expected, id))
	}
	return NewContext(ctx, id), nil
}

// expected names the allowed roles: "thorax", or "thorax or client".
func (g *Guard) expected() string {
	names := make([]string, len(g.Allow))
	for i, r := range g.Allow {
		names[i] = string(r)
	}
	return strings.Join(names, " or ")
}

func (g *Guard) refuse(ctx context.Context, method, expected, presented, msg string) error {
	g.logger().WarnContext(ctx, "refused call for its identity",
		"link", g.Link, "method", method, "expected", expected, "presented", presented, "reason", msg)
	g.Metrics.refused(g.Link, expected, presented)
	return status.Error(codes.PermissionDenied, msg)
}

// Binding refusals: the role is right, but the call names something (an
// instance id, a target) that belongs to another certificate. The metric's
// expected and presented labels stay bounded: they say which binding failed,
// not whose.
const (
	// BindingInstance is an instance id used by another Thorax certificate.
	BindingInstance = "own_instance"
	// BindingTarget is a target named by another target's agent.
	BindingTarget = "own_target"
	// BindingCommand is a command changed by a caller that neither holds it nor
	// reports for its target.
	BindingCommand = "own_command"
	// BindingScope is a target outside the scope Mandible's thorax.scopes gives the
	// caller's certificate.
	BindingScope = "scope"
	// presentedOther is the presented label of a binding refusal.
	presentedOther = "other"
)

// RefuseBinding logs, counts and returns the PermissionDenied refusal of a call
// whose caller id may not act for what it names; msg says both names.
func (g *Guard) RefuseBinding(ctx context.Context, binding string, id ID, msg string) error {
	if g == nil {
		return status.Error(codes.PermissionDenied, msg)
	}
	g.logger().WarnContext(ctx, "refused call for what it names",
		"link", g.Link, "binding", binding, "identity", id.String(), "reason", msg)
	g.Metrics.refused(g.Link, binding, presentedOther)
	return status.Error(codes.PermissionDenied, msg)
}

func (g *Guard) logger() *slog.Logger {
	if g.Logger == nil {
		return slog.Default()
	}
	return g.Logger
}

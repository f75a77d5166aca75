package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/google/uuid"
	"google.golang.org/grpc"

	"github.com/mantis-deploy/mantis/internal/identity"
	"github.com/mantis-deploy/mantis/schema"
)

// NewGuard returns the guard of MandibleService's server: only the thorax role
// may call it. Serve with its ServerOptions and set it as MandibleService.Guard,
// so that instance bindings are refused, logged and counted the same way.
func NewGuard(logger *slog.Logger, metrics *identity.Metrics) *identity.Guard {
	return &identity.Guard{
		Link: identity.LinkMandibleGRPC, Allow: []identity.Role{identity.RoleThorax},
		Logger: logger, Metrics: metrics,
	}
}

// ServerOptions returns the options of a server whose guard is g; none for nil,
// a plaintext development server.
func ServerOptions(g *identity.Guard) []grpc.ServerOption {
	if g == nil {
		return nil
	}
	return g.ServerOptions()
}

// authorizeInstance refuses a call naming instance unless it comes from the
// certificate name that registered it. Bindings never change, so they are
// cached. Without identities (grpc.insecure) every call is admitted; an unknown
// instance is left to the call itself, which says so.
func (s *MandibleService) authorizeInstance(ctx context.Context, instance uuid.UUID) error {
	caller, ok := identity.FromContext(ctx)
	if !ok {
		return nil
	}
	owner, cached := s.bound.Load(instance)
	if !cached {
		name, err := schema.InstanceCertificate(ctx, s.DB, instance)
		if errors.Is(err, schema.ErrNotFound) {
			return nil
		}
		if err != nil {
			return s.toStatus(ctx, "authorizing the instance", err)
		}
		owner, _ = s.bound.LoadOrStore(instance, name)
	}
	if owner == caller.Name {
		return nil
	}
	msg := fmt.Sprintf("instance %s belongs to certificate thorax/%s, certificate presents %s", instance, owner, caller)
	if owner == "" {
		msg = fmt.Sprintf("instance %s was registered without a certificate, certificate presents %s", instance, caller)
	}
	return s.Guard.RefuseBinding(ctx, identity.BindingInstance, caller, msg)
}

// refuseNotOwn refuses a call that changes a command its caller neither holds nor
// reports for (schema.ErrNotOwn): PERMISSION_DENIED, logged and counted as a refusal
// of what the call names. Without identities (grpc.insecure) it is refused all the same.
func (s *MandibleService) refuseNotOwn(ctx context.Context, err error) error {
	caller, ok := identity.FromContext(ctx)
	if !ok {
		caller = identity.ID{Role: identity.RoleThorax, Name: "(no certificate)"}
	}
	return s.Guard.RefuseBinding(ctx, identity.BindingCommand, caller, err.Error())
}

// scopeOf is ScopeOf, or no scope when the service has none.
func (s *MandibleService) scopeOf(cert string) (schema.InstanceScope, bool) {
	if s.ScopeOf == nil {
		return schema.InstanceScope{}, false
	}
	return s.ScopeOf(cert)
}

// authorizeScope refuses a result forwarded for target by an instance whose
// certificate's scope does not let it serve that target: a Thorax key reaches only the
// targets thorax.scopes gives it. An unscoped certificate, a result that names no
// target, and the holder of the command (whose claim its scope allowed) are not
// checked here.
func (s *MandibleService) authorizeScope(ctx context.Context, instance, command uuid.UUID, target string) error {
	caller, ok := identity.FromContext(ctx)
	if !ok || target == "" {
		return nil
	}
	if _, scoped := s.scopeOf(caller.Name); !scoped {
		return nil
	}
	may, err := schema.InstanceMayReport(ctx, s.DB, instance, command, target)
	if err != nil {
		return s.toStatus(ctx, "checking the instance's scope", err)
	}
	if may {
		return nil
	}
	return s.Guard.RefuseBinding(ctx, identity.BindingScope, caller,
		fmt.Sprintf("certificate %s may not serve target %s (thorax.scopes)", caller, target))
}

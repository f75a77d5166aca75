// Package identity reads who a peer is from its certificate. Every Mantis
// certificate names a role and a name as a URI SAN, spiffe://mantis/<role>/<name>;
// gRPC servers admit only the roles that may call them (Guard), and handlers bind
// what a call names (an instance id, a target) to the certificate's name.
package identity

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// Role is what a certificate's holder is in Mantis.
type Role string

// The roles of the development PKI and of the links that check them.
const (
	// RoleMandible is a Mandible replica (HTTP and gRPC server, broker client).
	RoleMandible Role = "mandible"
	// RoleThorax is a Thorax instance: client of Mandible and of listen agents,
	// server of poll agents.
	RoleThorax Role = "thorax"
	// RoleAgent is the agent of one target; its name is the target's name.
	RoleAgent Role = "agent"
	// RoleClient is a CLI, a test or a broker client.
	RoleClient Role = "client"
	// RoleRabbitMQ is the broker as a server.
	RoleRabbitMQ Role = "rabbitmq"
	// RolePostgres is the database as a server.
	RolePostgres Role = "postgres"
)

// Roles lists every role, in a fixed order.
var Roles = []Role{RoleMandible, RoleThorax, RoleAgent, RoleClient, RoleRabbitMQ, RolePostgres}

// Scheme and TrustDomain are the fixed parts of a Mantis identity URI.
const (
	Scheme      = "spiffe"
	TrustDomain = "mantis"
)

// namePattern is what a certificate's name may be: a target or instance name.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// ID is the role and name a certificate carries.
type ID struct {
	Role Role
	Name string
}

// String returns role/name, as refusals quote it.
func (id ID) String() string { return string(id.Role) + "/" + id.Name }

// URI returns the identity as the URI SAN of a certificate.
func (id ID) URI() *url.URL {
	return &url.URL{Scheme: Scheme, Host: TrustDomain, Path: "/" + string(id.Role) + "/" + id.Name}
}

// Validate reports whether the role is known and the name usable.
func (id ID) Validate() error {
	if !slices.Contains(Roles, id.Role) {
		return fmt.Errorf("role %q: must be one of %v", id.Role, Roles)
	}
	if !namePattern.MatchString(id.Name) {
		return fmt.Errorf("name %q: must match %s", id.Name, namePattern)
	}
	return nil
}

// Parse reads an identity URI, spiffe://mantis/<role>/<name>.
func Parse(u *url.URL) (ID, error) {
	if u.Scheme != Scheme || u.Host != TrustDomain || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return ID{}, fmt.Errorf("identity %q: not a %s://%s/<role>/<name> URI", u, Scheme, TrustDomain)
	}
	role, name, ok := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
	if !ok {
		return ID{}, fmt.Errorf("identity %q: no name after the role", u)
	}
	id := ID{Role: Role(role), Name: name}
	if err := id.Validate(); err != nil {
		return ID{}, fmt.Errorf("identity %q: %w", u, err)
	}
	return id, nil
}

// ErrNoIdentity is a certificate that carries no Mantis identity URI.
var ErrNoIdentity = errors.New("certificate carries no spiffe://mantis identity")

// FromCertificate returns the identity of cert: its one spiffe://mantis URI SAN.
// A certificate with none, or more than one, has no identity.
func FromCertificate(cert *x509.Certificate) (ID, error) {
	var found []ID
	for _, u := range cert.URIs {
		if u.Scheme != Scheme || u.Host != TrustDomain {
			continue
		}
		id, err := Parse(u)
		if err != nil {
			return ID{}, err
		}
		found = append(found, id)
	}
	switch len(found) {
	case 0:
		return ID{}, ErrNoIdentity
	case 1:
		return found[0], nil
	default:
		return ID{}, fmt.Errorf("certificate carries %d mantis identities: one is allowed", len(found))
	}
}

type contextKey struct{}

// NewContext returns ctx carrying id.
func NewContext(ctx context.Context, id ID) context.Context {
	return context.WithValue(ctx, contextKey{}, id)
}

// FromContext returns the identity Guard put in ctx. ok is false on a server
// without certificates (a plaintext development link).
func FromContext(ctx context.Context) (id ID, ok bool) {
	id, ok = ctx.Value(contextKey{}).(ID)
	return id, ok
}

// peerCertificate returns the verified leaf certificate of a gRPC call's peer,
// or nil when the call came without TLS or without a verified certificate.
func peerCertificate(ctx context.Context) *x509.Certificate {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return nil
	}
	return info.State.VerifiedChains[0][0]
}

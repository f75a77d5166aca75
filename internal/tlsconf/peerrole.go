package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"

	"github.com/mantis-deploy/mantis/internal/identity"
)

// RefusalHook hears of each handshake a peer check refuses, for the caller to log
// and count it (identity.HandshakeRefusals).
type RefusalHook = func(identity.HandshakeRefusal)

// RequirePeerRole makes a client cfg refuse, at the handshake, a server whose
// verified certificate does not carry an identity of role: a Thorax instance talks
// only to a Mandible, an agent only to a Thorax, a Thorax only to agents. Any holder
// of a certificate from the same CA could otherwise stand in for the server. A
// VerifyConnection cfg already has still runs first. Each refusal goes to hooks.
func RequirePeerRole(cfg *tls.Config, role identity.Role, hooks ...RefusalHook) {
	checkVerifiedPeer(cfg, string(role), hooks, func(leaf *x509.Certificate) error {
		id, err := identity.FromCertificate(leaf)
		if err != nil {
			return fmt.Errorf("peer certificate %q: expected a %s identity: %w", leaf.Subject.CommonName, role, err)
		}
		if id.Role != role {
			return fmt.Errorf("peer certificate %q is %s, expected a %s", leaf.Subject.CommonName, id, role)
		}
		return nil
	})
}

// checkVerifiedPeer adds check of the peer's verified leaf certificate to cfg's
// VerifyConnection, after the one cfg already has; a refusal by check goes to
// hooks, with expected as what was required.
func checkVerifiedPeer(cfg *tls.Config, expected string, hooks []RefusalHook, check func(leaf *x509.Certificate) error) {
	previous := cfg.VerifyConnection
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if previous != nil {
			if err := previous(cs); err != nil {
				return err
			}
		}
		var leaf *x509.Certificate
		err := errors.New("peer certificate: none verified")
		if len(cs.VerifiedChains) > 0 && len(cs.PeerCertificates) > 0 {
			leaf = cs.PeerCertificates[0]
			err = check(leaf)
		}
		if err != nil {
			presented, peer := identity.PresentedBy(leaf)
			for _, hook := range hooks {
				hook(identity.HandshakeRefusal{Expected: expected, Presented: presented, Peer: peer, Err: err})
			}
		}
		return err
	}
}

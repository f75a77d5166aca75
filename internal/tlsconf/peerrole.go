package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"

	"github.com/mantis-deploy/mantis/internal/identity"
)

// RequirePeerRole makes a client cfg refuse, at the handshake, a server whose
// verified certificate does not carry an identity of role: a Thorax instance talks
// only to a Mandible, an agent only to a Thorax, a Thorax only to agents. Any holder
// of a certificate from the same CA could otherwise stand in for the server. A
// VerifyConnection cfg already has still runs first.
func RequirePeerRole(cfg *tls.Config, role identity.Role) {
	checkVerifiedPeer(cfg, func(leaf *x509.Certificate) error {
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
// VerifyConnection, after the one cfg already has.
func checkVerifiedPeer(cfg *tls.Config, check func(leaf *x509.Certificate) error) {
	previous := cfg.VerifyConnection
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if previous != nil {
			if err := previous(cs); err != nil {
				return err
			}
		}
		if len(cs.VerifiedChains) == 0 || len(cs.PeerCertificates) == 0 {
			return errors.New("peer certificate: none verified")
		}
		return check(cs.PeerCertificates[0])
	}
}

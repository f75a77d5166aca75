package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"

	"github.com/mantis-deploy/mantis/internal/identity"
)

// RequirePeerID makes a client cfg refuse, at the handshake, a server whose
// verified certificate does not carry exactly the identity want: Thorax calls a
// listen target only at a server whose certificate names that target, so an
// agent of another target answering at the address (a mistyped registration, a
// host that moved, an impostor with any agent pair) never receives the command.
// A VerifyConnection cfg already has still runs first. Each refusal goes to
// hooks, with expected as what was required (a bounded label, such as
// identity.BindingTarget).
func RequirePeerID(cfg *tls.Config, want identity.ID, expected string, hooks ...RefusalHook) {
	checkVerifiedPeer(cfg, expected, hooks, func(leaf *x509.Certificate) error {
		id, err := identity.FromCertificate(leaf)
		if err != nil {
			return fmt.Errorf("peer certificate %q: expected identity %s: %w", leaf.Subject.CommonName, want, err)
		}
		if id != want {
			return fmt.Errorf("peer certificate %q is %s, expected %s", leaf.Subject.CommonName, id, want)
		}
		return nil
	})
}

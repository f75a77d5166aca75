package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"slices"

	"github.com/mantis-deploy/mantis/internal/identity"
)

// RequirePeerNames makes cfg refuse, at the handshake, a peer whose verified
// certificate names none of names: as the name of its identity
// (spiffe://mantis/<role>/<name>), its CommonName or one of its DNS names.
// Signature checks stay with cfg (ClientCAs or RootCAs); this narrows who,
// among the holders of certificates from that CA, may connect. A
// VerifyConnection cfg already has still runs first. Each refusal goes to hooks,
// expecting identity.ExpectedAllowedName.
func RequirePeerNames(cfg *tls.Config, names []string, hooks ...RefusalHook) {
	allowed := slices.Clone(names)
	checkVerifiedPeer(cfg, identity.ExpectedAllowedName, hooks, func(leaf *x509.Certificate) error {
		if id, err := identity.FromCertificate(leaf); err == nil && slices.Contains(allowed, id.Name) {
			return nil
		}
		if slices.Contains(allowed, leaf.Subject.CommonName) {
			return nil
		}
		for _, dns := range leaf.DNSNames {
			if slices.Contains(allowed, dns) {
				return nil
			}
		}
		return fmt.Errorf("peer certificate %q: names none of %q", leaf.Subject.CommonName, allowed)
	})
}

package agent

import (
	"fmt"

	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/identity"
)

// CheckListenIdentity returns an error when the listen certificate of cfg is not
// the agent of cfg.Name (spiffe://mantis/agent/<name>). Thorax calls a listen
// target only at a server whose certificate names that target, so an agent
// serving another name's pair (the shared "agent" pair, a copy from another
// host) would refuse nothing and receive nothing: it fails at start instead,
// naming both. A plaintext listener (listen.insecure) has no certificate.
func CheckListenIdentity(cfg config.Agent) error {
	if cfg.Listen.Insecure {
		return nil
	}
	want := identity.ID{Role: identity.RoleAgent, Name: cfg.Name}
	cert, err := identity.ReadCertificate(cfg.Listen.CertPath)
	if err != nil {
		return fmt.Errorf("checking listen.cert_path: %w", err)
	}
	if cert.ID != want {
		return fmt.Errorf("checking listen.cert_path %s: the certificate is %s, the agent is %s: "+
			"Thorax calls target %s only at a server whose certificate names it (issue one with "+
			"mantisctl dev certs --issue agent/%s, or your CA)", cfg.Listen.CertPath, cert.ID, want, cfg.Name, cfg.Name)
	}
	return nil
}

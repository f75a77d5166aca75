package devcerts

import (
	"crypto/x509"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/mantis-deploy/mantis/internal/identity"
)

// Issued returns the certificate and key paths of the pair Issue makes for role
// and name.
func (b Bundle) Issued(role identity.Role, name string) (cert, key string) {
	base := string(role) + "-" + name
	return filepath.Join(b.Dir, base+".crt"), filepath.Join(b.Dir, base+".key")
}

// Issue makes sure the bundle holds a pair for role and name, signed by the
// bundle's CA and carrying spiffe://mantis/<role>/<name>: an agent's pair per
// target, a Thorax's per instance, or a pair of the wrong role for a test. A
// server role's pair names hosts, localhost, 127.0.0.1, ::1 and name. Like
// Generate, it keeps a pair that qualifies and replaces one that does not. The
// bundle must have been generated first.
func (b Bundle) Issue(role identity.Role, name string, hosts []string) (cert, key string, err error) {
	id := identity.ID{Role: role, Name: name}
	if err := id.Validate(); err != nil {
		return "", "", fmt.Errorf("issuing a certificate pair: %w", err)
	}
	now := time.Now()
	ca, caKey, err := b.loadCA(now)
	if err != nil {
		return "", "", fmt.Errorf("issuing %s: loading the CA of %s: %w", id, b.Dir, err)
	}
	cert, key = b.Issued(role, name)
	p := pair{name: filepath.Base(cert[:len(cert)-len(".crt")]), commonName: name, id: id, usages: roleUsages[role]}
	names := p.hosts(hosts)
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	err = b.pairValid(p, names, roots, now)
	if err == nil {
		return cert, key, nil
	}
	if errors.As(err, new(unreadableError)) {
		return "", "", err
	}
	if err := b.writePair(p, names, ca, caKey, now); err != nil {
		return "", "", err
	}
	return cert, key, nil
}

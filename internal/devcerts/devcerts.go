// Package devcerts writes a development PKI: one CA and the certificate
// pairs every Mantis link needs, all signed by that CA, as PEM files.
//
// It is for development, tests and first installs, not for production trust:
// the CA key sits next to the certificates it signs.
package devcerts

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/mantis-deploy/mantis/internal/identity"
)

const (
	caName = "Mantis Dev CA"
	// caLifetime and pairLifetime are how long new certificates last.
	caLifetime   = 10 * 365 * 24 * time.Hour
	pairLifetime = 2 * 365 * 24 * time.Hour
	// renewBefore is the remaining validity under which a certificate is
	// replaced rather than kept.
	renewBefore = 30 * 24 * time.Hour
	// clockSkew backdates NotBefore so a peer whose clock runs slow still
	// accepts a certificate made a moment ago.
	clockSkew = time.Hour
)

// pair describes one certificate pair the bundle holds.
type pair struct {
	// name is the base name of the pair's files.
	name       string
	commonName string
	// id is the role and name the certificate carries as its URI SAN.
	id     identity.ID
	usages []x509.ExtKeyUsage
}

func (p pair) server() bool { return slices.Contains(p.usages, x509.ExtKeyUsageServerAuth) }

var (
	serverAndClient = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	pairs           = []pair{
		// Mandible serves HTTP and gRPC and is a client of the broker.
		{name: "mandible", commonName: "mandible", id: identity.ID{Role: identity.RoleMandible, Name: "mandible"}, usages: serverAndClient},
		{name: "rabbitmq", commonName: "rabbitmq", id: identity.ID{Role: identity.RoleRabbitMQ, Name: "rabbitmq"}, usages: serverOnly},
		// Thorax is a client of Mandible and of listen-mode agents, and the
		// server poll-mode agents call.
		{name: "thorax", commonName: "thorax", id: identity.ID{Role: identity.RoleThorax, Name: "thorax"}, usages: serverAndClient},
		// An agent calls Thorax in poll mode and serves it in listen mode. The
		// shared "agent" pair speaks for the target named "agent" only: each
		// target's agent needs a pair of its own (Issue).
		{name: "agent", commonName: "agent", id: identity.ID{Role: identity.RoleAgent, Name: "agent"}, usages: serverAndClient},
		// mantisctl, tests and broker clients; "mantis" is the broker user.
		{name: "client", commonName: "mantis", id: identity.ID{Role: identity.RoleClient, Name: "client"}, usages: clientOnly},
	}
	serverOnly = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	clientOnly = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
)

// roleUsages are the key usages of a pair Issue makes for each role.
var roleUsages = map[identity.Role][]x509.ExtKeyUsage{
	identity.RoleMandible: serverAndClient,
	identity.RoleThorax:   serverAndClient,
	identity.RoleAgent:    serverAndClient,
	identity.RoleClient:   clientOnly,
	identity.RoleRabbitMQ: serverOnly,
	identity.RolePostgres: serverOnly,
}

// PairNames returns the names Pair accepts, in a fixed order.
func PairNames() []string {
	names := make([]string, len(pairs))
	for i, p := range pairs {
		names[i] = p.name
	}
	return names
}

// Bundle is a directory of development certificates.
type Bundle struct {
	Dir string
}

// CACert returns the path of the CA certificate.
func (b Bundle) CACert() string { return filepath.Join(b.Dir, "ca.crt") }

// CAKey returns the path of the CA's private key.
func (b Bundle) CAKey() string { return filepath.Join(b.Dir, "ca.key") }

// Pair returns the certificate and key paths of the named pair: "mandible",
// "rabbitmq", "thorax", "agent" or "client".
func (b Bundle) Pair(name string) (cert, key string) {
	return filepath.Join(b.Dir, name+".crt"), filepath.Join(b.Dir, name+".key")
}

// Generate makes sure dir holds a CA and every pair, signed by that CA and
// valid for more than 30 days. It keeps what already qualifies, byte for
// byte, and writes only what is missing, expiring, signed by another CA or
// (for server pairs) not covering every host. Server pairs name hosts,
// localhost, 127.0.0.1, ::1 and the pair's own name (the Compose service
// name). Keys are written mode 0600, certificates 0644.
func Generate(dir string, hosts []string) (Bundle, error) {
	b := Bundle{Dir: dir}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return b, fmt.Errorf("creating certificate directory: %w", err)
	}
	now := time.Now()

	ca, caKey, err := b.loadCA(now)
	if errors.As(err, new(unreadableError)) {
		return b, err
	}
	if err != nil {
		if ca, caKey, err = b.writeCA(now); err != nil {
			return b, err
		}
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)

	for _, p := range pairs {
		names := p.hosts(hosts)
		err := b.pairValid(p, names, roots, now)
		if err == nil {
			continue
		}
		if errors.As(err, new(unreadableError)) {
			return b, err
		}
		if err := b.writePair(p, names, ca, caKey, now); err != nil {
			return b, err
		}
	}
	return b, nil
}

// hosts returns the subject alternative names of the pair.
func (p pair) hosts(extra []string) []string {
	if !p.server() {
		return nil
	}
	var names []string
	for _, h := range append(append([]string{}, extra...), p.id.Name, "localhost", "127.0.0.1", "::1") {
		if h != "" && !slices.Contains(names, h) {
			names = append(names, h)
		}
	}
	return names
}

// loadCA returns the CA on disk if it is a CA, matches its key and stays
// valid beyond renewBefore.
func (b Bundle) loadCA(now time.Time) (*x509.Certificate, crypto.Signer, error) {
	cert, key, err := load(b.CACert(), b.CAKey())
	if err != nil {
		return nil, nil, err
	}
	if !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, nil, errors.New("not a CA certificate")
	}
	if now.Before(cert.NotBefore) || now.Add(renewBefore).After(cert.NotAfter) {
		return nil, nil, errors.New("CA certificate expires within 30 days")
	}
	return cert, key, nil
}

// pairValid returns nil when the pair on disk can be kept.
func (b Bundle) pairValid(p pair, names []string, roots *x509.CertPool, now time.Time) error {
	cert, _, err := load(b.Pair(p.name))
	if err != nil {
		return err
	}
	if now.Before(cert.NotBefore) {
		return errors.New("certificate not valid yet")
	}
	if id, err := identity.FromCertificate(cert); err != nil || id != p.id {
		return fmt.Errorf("certificate does not carry identity %s", p.id)
	}
	for _, usage := range p.usages {
		// Verifying 30 days ahead rejects a pair (or CA) about to expire.
		if _, err := cert.Verify(x509.VerifyOptions{
			Roots:       roots,
			CurrentTime: now.Add(renewBefore),
			KeyUsages:   []x509.ExtKeyUsage{usage},
		}); err != nil {
			return err
		}
	}
	for _, h := range names {
		if err := cert.VerifyHostname(h); err != nil {
			return err
		}
	}
	return nil
}

func (b Bundle) writeCA(now time.Time) (*x509.Certificate, crypto.Signer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating CA key: %w", err)
	}
	template := &x509.Certificate{
		SerialNumber:          serialNumber(),
		Subject:               pkix.Name{CommonName: caName, Organization: []string{"Mantis"}},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(caLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, key.Public(), key)
	if err != nil {
		return nil, nil, fmt.Errorf("creating CA certificate: %w", err)
	}
	if err := store(b.CACert(), b.CAKey(), der, key); err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("parsing new CA certificate: %w", err)
	}
	return cert, key, nil
}

func (b Bundle) writePair(p pair, names []string, ca *x509.Certificate, caKey crypto.Signer, now time.Time) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generating %s key: %w", p.name, err)
	}
	notAfter := now.Add(pairLifetime)
	if notAfter.After(ca.NotAfter) {
		notAfter = ca.NotAfter
	}
	template := &x509.Certificate{
		SerialNumber:          serialNumber(),
		Subject:               pkix.Name{CommonName: p.commonName, Organization: []string{"Mantis"}},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           p.usages,
		BasicConstraintsValid: true,
		URIs:                  []*url.URL{p.id.URI()},
	}
	for _, h := range names {
		if ip := net.ParseIP(h); ip != nil {
			template.IPAddresses = append(template.IPAddresses, ip)
		} else {
			template.DNSNames = append(template.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, template, ca, key.Public(), caKey)
	if err != nil {
		return fmt.Errorf("creating %s certificate: %w", p.name, err)
	}
	certPath, keyPath := b.Pair(p.name)
	return store(certPath, keyPath, der, key)
}

func serialNumber() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return n
}

// unreadableError is a file that exists but cannot be read: Generate stops
// rather than replace what it cannot inspect.
type unreadableError struct{ err error }

func (e unreadableError) Error() string { return e.err.Error() }
func (e unreadableError) Unwrap() error { return e.err }

func readFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, unreadableError{err}
	}
	return b, err
}

// load reads a PEM certificate and its PKCS#8 key and checks they match.
func load(certPath, keyPath string) (*x509.Certificate, crypto.Signer, error) {
	certPEM, err := readFile(certPath)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err := readFile(keyPath)
	if err != nil {
		return nil, nil, err
	}
	certBlock, _ := pem.Decode(certPEM)
	if certBlock == nil || certBlock.Type != "CERTIFICATE" {
		return nil, nil, fmt.Errorf("%s: no PEM certificate", certPath)
	}
	cert, err := x509.ParseCertificate(certBlock.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", certPath, err)
	}
	keyBlock, _ := pem.Decode(keyPEM)
	if keyBlock == nil || keyBlock.Type != "PRIVATE KEY" {
		return nil, nil, fmt.Errorf("%s: no PEM private key", keyPath)
	}
	parsed, err := x509.ParsePKCS8PrivateKey(keyBlock.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", keyPath, err)
	}
	key, ok := parsed.(crypto.Signer)
	if !ok {
		return nil, nil, fmt.Errorf("%s: key cannot sign", keyPath)
	}
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(cert.PublicKey) {
		return nil, nil, fmt.Errorf("%s does not match %s", keyPath, certPath)
	}
	return cert, key, nil
}

// store writes the key first, then the certificate, each atomically, so a
// crash leaves at worst a mismatched pair that the next Generate replaces.
func store(certPath, keyPath string, der []byte, key *ecdsa.PrivateKey) error {
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", keyPath, err)
	}
	if err := writeAtomic(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return err
	}
	return writeAtomic(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

func writeAtomic(path string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer os.Remove(f.Name()) // no-op after the rename
	// CreateTemp makes the file 0600; set the final mode before any content.
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

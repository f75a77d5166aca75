package identity

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"log/slog"
	"os"
	"time"
)

const (
	// ExpiryWarning is how long before its certificate expires a process warns
	// in its log.
	ExpiryWarning = 14 * 24 * time.Hour
	// expiryCheckInterval is how often a running process looks again.
	expiryCheckInterval = 24 * time.Hour
)

// Certificate is what a process knows of one of its own certificates.
type Certificate struct {
	Path     string
	ID       ID
	NotAfter time.Time
}

// ReadCertificate reads the first certificate of the PEM file at path and its
// identity; a certificate without one is reported as role "unknown" under its
// common name, so its expiry is still watched.
func ReadCertificate(path string) (Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Certificate{}, fmt.Errorf("reading certificate: %w", err)
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return Certificate{}, fmt.Errorf("certificate %s: no PEM certificate", path)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return Certificate{}, fmt.Errorf("certificate %s: %w", path, err)
	}
	id, err := FromCertificate(cert)
	if err != nil {
		id = ID{Role: "unknown", Name: cert.Subject.CommonName}
	}
	return Certificate{Path: path, ID: id, NotAfter: cert.NotAfter}, nil
}

// CheckExpiry reads each certificate (paths repeated or empty are skipped),
// sets its expiry metric and warns when it expires within ExpiryWarning.
func CheckExpiry(ctx context.Context, logger *slog.Logger, m *Metrics, now time.Time, paths ...string) {
	seen := map[string]bool{}
	for _, path := range paths {
		if path == "" || seen[path] {
			continue
		}
		seen[path] = true
		c, err := ReadCertificate(path)
		if err != nil {
			logger.WarnContext(ctx, "cannot read own certificate for its expiry", "path", path, "err", err)
			continue
		}
		m.setExpiry(string(c.ID.Role), c.ID.Name, float64(c.NotAfter.Unix()))
		if left := c.NotAfter.Sub(now); left < ExpiryWarning {
			logger.WarnContext(ctx, "certificate expires soon", "path", path, "identity", c.ID.String(),
				"not_after", c.NotAfter, "remaining", left.Round(time.Minute))
		}
	}
}

// WatchExpiry runs CheckExpiry now and then daily until ctx ends, so that a
// certificate replaced on disk is seen and a long-running process keeps warning.
func WatchExpiry(ctx context.Context, logger *slog.Logger, m *Metrics, paths ...string) {
	ticker := time.NewTicker(expiryCheckInterval)
	defer ticker.Stop()
	for {
		CheckExpiry(ctx, logger, m, time.Now(), paths...)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

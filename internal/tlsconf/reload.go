package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"os"
	"sync"
	"time"
)

// ReloadCheckInterval is how often, at most, a handshake looks at the files of a
// certificate pair or CA bundle for a change: one stat of each file, so a pair
// rotated on disk (cert-manager, a renewal job) is served from the next handshake
// on, without a restart.
const ReloadCheckInterval = time.Second

// fileStamp is what tells that a file changed: its modification time and size.
type fileStamp struct {
	modTime time.Time
	size    int64
}

func stamps(paths []string) ([]fileStamp, error) {
	out := make([]fileStamp, len(paths))
	for i, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		out[i] = fileStamp{modTime: info.ModTime(), size: info.Size()}
	}
	return out, nil
}

func sameStamps(a, b []fileStamp) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].modTime.Equal(b[i].modTime) || a[i].size != b[i].size {
			return false
		}
	}
	return true
}

// reloading holds the value loaded from some files and loads it again when they
// change. A change that does not load keeps the last good value, and is logged once.
type reloading[T any] struct {
	paths  []string
	load   func() (T, error)
	logger *slog.Logger

	mu      sync.Mutex
	value   T
	stamps  []fileStamp
	checked time.Time
}

// newReloading loads the value once; that first load must succeed.
func newReloading[T any](paths []string, load func() (T, error), logger *slog.Logger) (*reloading[T], error) {
	st, _ := stamps(paths) // a stat failure here shows up as the load's error
	v, err := load()
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.Default()
	}
	return &reloading[T]{paths: paths, load: load, logger: logger, value: v, stamps: st, checked: time.Now()}, nil
}

// current returns the value, loaded again first when the files changed since the
// last look (at most once per ReloadCheckInterval).
func (r *reloading[T]) current() T {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if now.Sub(r.checked) < ReloadCheckInterval {
		return r.value
	}
	r.checked = now
	st, err := stamps(r.paths)
	if err != nil {
		if r.stamps != nil {
			r.logger.Warn("certificate files not readable, keeping the loaded ones", "paths", r.paths, "err", err)
			r.stamps = nil
		}
		return r.value
	}
	if sameStamps(st, r.stamps) {
		return r.value
	}
	r.stamps = st
	v, err := r.load()
	if err != nil {
		r.logger.Error("reloading changed certificate files failed, keeping the loaded ones", "paths", r.paths, "err", err)
		return r.value
	}
	r.value = v
	r.logger.Info("reloaded changed certificate files", "paths", r.paths)
	return v
}

// Pair is a certificate pair that follows its files: each handshake that asks for
// it gets the pair as the files are now, or the last one that loaded.
type Pair struct{ r *reloading[*tls.Certificate] }

// LoadPair loads the pair at cert and key, which must load now; logger (nil for
// slog's default) hears of later reloads and of changes that do not load.
func LoadPair(cert, key string, logger *slog.Logger) (*Pair, error) {
	r, err := newReloading([]string{cert, key}, func() (*tls.Certificate, error) {
		pair, err := loadPair(cert, key)
		if err != nil {
			return nil, err
		}
		return &pair[0], nil
	}, logger)
	if err != nil {
		return nil, err
	}
	return &Pair{r: r}, nil
}

// Certificate returns the current pair.
func (p *Pair) Certificate() *tls.Certificate { return p.r.current() }

// GetCertificate serves the current pair, for tls.Config.GetCertificate.
func (p *Pair) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return p.Certificate(), nil
}

// GetClientCertificate presents the current pair, for tls.Config.GetClientCertificate.
func (p *Pair) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return p.Certificate(), nil
}

// Pool is a CA bundle that follows its file.
type Pool struct{ r *reloading[*x509.CertPool] }

// LoadPool loads the CA bundle at path, which must load now.
func LoadPool(path string, logger *slog.Logger) (*Pool, error) {
	r, err := newReloading([]string{path}, func() (*x509.CertPool, error) { return loadPool(path) }, logger)
	if err != nil {
		return nil, err
	}
	return &Pool{r: r}, nil
}

// CertPool returns the current bundle.
func (p *Pool) CertPool() *x509.CertPool { return p.r.current() }

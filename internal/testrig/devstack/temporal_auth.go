package devstack

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Temporal authorization (Options.TemporalAuthorization): temporal-server's default
// JWT claim mapper and authorizer, with the stack as the token issuer. The stack keeps
// an ES256 key of its own and serves its public half as a JWKS on loopback, which
// temporal-server reads when it starts; TemporalToken signs tokens whose
// "permissions" claim grants "<namespace>:<read|write|worker|admin>" (or
// "temporal-system:admin" for the whole cluster).

// temporalIssuerKeyFile is where the signing key lives in the stack directory.
const temporalIssuerKeyFile = "temporal-jwt-key.pem"

// TemporalAdminPermission grants every API on every namespace.
const TemporalAdminPermission = "temporal-system:admin"

// temporalIssuer signs tokens and serves the key that checks them.
type temporalIssuer struct {
	key    *ecdsa.PrivateKey
	keyID  string
	server *http.Server
	// URL is the JWKS address temporal-server is given.
	URL string
}

// temporalIssuer returns the stack's issuer, starting its JWKS server on first use.
func (s *Stack) temporalIssuer() (*temporalIssuer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.issuer != nil {
		return s.issuer, nil
	}
	key, err := loadOrCreateSigningKey(filepath.Join(s.opts.Dir, temporalIssuerKeyFile))
	if err != nil {
		return nil, fmt.Errorf("the Temporal token signing key: %w", err)
	}
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(der)
	iss := &temporalIssuer{key: key, keyID: hex.EncodeToString(sum[:8])}
	jwks, err := json.Marshal(map[string]any{"keys": []map[string]string{iss.jwk()}})
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /jwks.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(jwks)
	})
	iss.server = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	iss.URL = "http://" + l.Addr().String() + "/jwks.json"
	go func() { _ = iss.server.Serve(l) }()
	s.issuer = iss
	return iss, nil
}

// jwk is the public key as a JSON Web Key (RFC 7517, 7518).
func (i *temporalIssuer) jwk() map[string]string {
	pub, _ := i.key.PublicKey.ECDH() // a P-256 key always converts
	raw := pub.Bytes()               // 0x04 || X || Y
	enc := base64.RawURLEncoding.EncodeToString
	return map[string]string{
		"kty": "EC", "crv": "P-256", "use": "sig", "alg": "ES256", "kid": i.keyID,
		"x": enc(raw[1:33]), "y": enc(raw[33:]),
	}
}

// token signs a token for subject, valid for ttl, granting permissions.
func (i *temporalIssuer) token(subject string, ttl time.Duration, permissions []string) (string, error) {
	now := time.Now()
	t := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{
		"sub": subject, "permissions": permissions,
		"iat": now.Unix(), "nbf": now.Add(-time.Minute).Unix(), "exp": now.Add(ttl).Unix(),
	})
	t.Header["kid"] = i.keyID
	return t.SignedString(i.key)
}

// close stops the JWKS server.
func (i *temporalIssuer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = i.server.Shutdown(ctx)
}

// TemporalToken returns a bearer token temporal-server accepts for subject, valid for
// ttl, granting permissions ("default:write", say). It fails unless the stack runs
// temporal-server with authorization.
func (s *Stack) TemporalToken(subject string, ttl time.Duration, permissions ...string) (string, error) {
	if !s.opts.TemporalServer || !s.opts.TemporalAuthorization {
		return "", errors.New("this stack's Temporal checks no tokens: start it with TemporalServer and TemporalAuthorization")
	}
	iss, err := s.temporalIssuer()
	if err != nil {
		return "", err
	}
	return iss.token(subject, ttl, permissions)
}

// loadOrCreateSigningKey reads the P-256 key at path, or writes a new one there
// (readable by its owner only).
func loadOrCreateSigningKey(path string) (*ecdsa.PrivateKey, error) {
	if b, err := os.ReadFile(path); err == nil {
		block, _ := pem.Decode(b)
		if block == nil {
			return nil, fmt.Errorf("%s holds no PEM block", path)
		}
		key, err := x509.ParseECPrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if key.Curve != elliptic.P256() {
			return nil, fmt.Errorf("%s: not a P-256 key", path)
		}
		return key, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return nil, err
	}
	return key, nil
}

package config

import (
	"log/slog"
	"net"
	"time"
)

// HTTP is the JSON API and SSE server.
type HTTP struct {
	// Listen is the host:port the server listens on. Without CertPath and
	// KeyPath, plain HTTP is accepted only on a loopback address, unless
	// AllowPlaintext is set.
	Listen string `toml:"listen"`
	// CertPath is the server's TLS certificate, set together with KeyPath; with
	// both set the API is served over HTTPS only.
	CertPath string `toml:"cert_path"`
	// KeyPath is the private key of CertPath.
	KeyPath string `toml:"key_path"`
	// AllowPlaintext permits plain HTTP on a listen address that is not loopback.
	// Unsafe: bearer tokens and everything the API returns cross the network in
	// clear. Plain HTTP on loopback needs no switch.
	AllowPlaintext bool `toml:"allow_plaintext"`
	// TokenFile holds the accepted tokens as {name, scope, sha256} entries (TOML or
	// JSON; `mantisctl token create` prints one); Mandible re-reads it on SIGHUP.
	// Required, unless the deprecated tokens list is set.
	TokenFile string `toml:"token_file"`
	// Tokens is the deprecated flat list of bearer tokens (at least 16 characters
	// each), each accepted with the admin scope; Mandible warns at start. Use
	// TokenFile instead.
	Tokens []string `toml:"tokens" secret:"true"`
	// TokensFile is a file holding Tokens, one a line.
	TokensFile string `toml:"tokens_file" secretfile:"tokens"`
	// MaxBodyBytes is the largest request body the API reads, in bytes.
	MaxBodyBytes int64 `toml:"max_body_bytes"`
	// MaxCodecBodyBytes bounds a body of the payload codec endpoint (/codec/decode,
	// /codec/encode), which carries whole payloads: Temporal refuses one past 2 MiB
	// by default, and a call carries a few, base64 inside JSON.
	MaxCodecBodyBytes int64 `toml:"max_codec_body_bytes"`
	// ReadHeaderTimeout bounds reading a request's headers.
	ReadHeaderTimeout Duration `toml:"read_header_timeout"`
	// ReadTimeout bounds reading a whole request, its body included. An event stream
	// lifts it once it has started: its request is read, and it lives for hours.
	ReadTimeout Duration `toml:"read_timeout"`
	// WriteTimeout bounds writing an answer. An event stream sets a deadline of its
	// own on each write instead.
	WriteTimeout Duration `toml:"write_timeout"`
	// IdleTimeout closes a kept-alive connection that sends no request for this long.
	IdleTimeout Duration `toml:"idle_timeout"`
	// MaxConnections caps the connections served at once; more wait to be accepted
	// until one closes.
	MaxConnections int `toml:"max_connections"`
}

// defaultHTTP is the [http] section's defaults.
func defaultHTTP() HTTP {
	return HTTP{
		Listen: "127.0.0.1:8080", MaxBodyBytes: 1 << 20, MaxCodecBodyBytes: 8 << 20,
		ReadHeaderTimeout: Duration{10 * time.Second}, ReadTimeout: Duration{time.Minute},
		WriteTimeout: Duration{2 * time.Minute}, IdleTimeout: Duration{2 * time.Minute},
		MaxConnections: 1024,
	}
}

// TLS reports whether the API is served over HTTPS.
func (h HTTP) TLS() bool { return h.CertPath != "" || h.KeyPath != "" }

// String returns the section with the tokens redacted.
func (h HTTP) String() string { return render(h) }

// GoString is String, so that %#v does not print secrets either.
func (h HTTP) GoString() string { return render(h) }

// LogValue returns the section with the tokens redacted.
func (h HTTP) LogValue() slog.Value { return logValue(h) }

// minTokenLength is the shortest legacy http.tokens entry accepted.
const minTokenLength = 16

func (h HTTP) validate(p *problems) {
	p.listenAddress("http.listen", h.Listen)
	if len(h.Tokens) == 0 && h.TokenFile == "" {
		p.add("http.token_file", "required (or the deprecated http.tokens)")
	}
	for i, tok := range h.Tokens {
		if len(tok) < minTokenLength {
			p.add("http.tokens", "token %d must be at least %d characters, got %d", i+1, minTokenLength, len(tok))
		}
	}
	p.positive("http.max_body_bytes", h.MaxBodyBytes)
	p.positive("http.max_codec_body_bytes", h.MaxCodecBodyBytes)
	p.positive("http.max_connections", int64(h.MaxConnections))
	switch {
	case h.CertPath == "" && h.KeyPath != "":
		p.add("http.cert_path", "required when http.key_path is set")
	case h.CertPath != "" && h.KeyPath == "":
		p.add("http.key_path", "required when http.cert_path is set")
	case !h.TLS() && !h.AllowPlaintext && h.Listen != "" && !loopback(h.Listen):
		p.add("http.listen", "plain HTTP on %q, which is not a loopback address: set http.cert_path and http.key_path, "+
			"or http.allow_plaintext = true (unsafe: tokens cross the network in clear)", h.Listen)
	}
}

// loopback reports whether a listen address is on a loopback interface only.
// An empty host (":8080") listens on every interface.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

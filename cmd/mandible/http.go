package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/net/netutil"

	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/mandible/apitoken"
	"github.com/mantis-deploy/mantis/internal/tlsconf"
)

// listenHTTP opens the API's listener: TLS with [http] cert_path/key_path, plain
// otherwise (validation allowed that only on loopback or with http.allow_plaintext).
// The pair follows its files: a renewed pair is served from the next handshake on.
func listenHTTP(cfg config.HTTP, logger *slog.Logger) (net.Listener, error) {
	var tlsCfg *tls.Config
	if cfg.TLS() {
		pair, err := tlsconf.LoadPair(cfg.CertPath, cfg.KeyPath, logger)
		if err != nil {
			return nil, fmt.Errorf("http.cert_path/http.key_path: loading the TLS pair: %w", err)
		}
		tlsCfg = &tls.Config{GetCertificate: pair.GetCertificate, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}}
	} else if cfg.AllowPlaintext {
		logger.Warn("serving the HTTP API in plain text (http.allow_plaintext = true): tokens cross the network in clear",
			"listen", cfg.Listen)
	}
	l, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("http.listen %s: %w", cfg.Listen, err)
	}
	// Past the cap a connection waits in the backlog until one closes; the timeouts
	// of httpServer close those that hold one without using it. Validate wants a cap;
	// a section built without one (zero) has none.
	if cfg.MaxConnections > 0 {
		l = netutil.LimitListener(l, cfg.MaxConnections)
	}
	if tlsCfg != nil {
		return tls.NewListener(l, tlsCfg), nil
	}
	return l, nil
}

// tokenSource keeps the API's keyring in step with the configuration: the token
// file, re-read on SIGHUP, and the deprecated flat list, as admin.
type tokenSource struct {
	cfg    config.HTTP
	keys   *apitoken.Keyring
	logger *slog.Logger
	hangup chan os.Signal
}

// newTokenSource reads the tokens once and starts listening for SIGHUP, so a signal
// sent once the API answers is never missed.
func newTokenSource(cfg config.HTTP, logger *slog.Logger) (*tokenSource, error) {
	if len(cfg.Tokens) > 0 {
		logger.Warn("http.tokens is deprecated: its tokens are accepted with the admin scope and recorded as legacy-N; "+
			"move them to http.token_file (mantisctl token create)", "tokens", len(cfg.Tokens))
	}
	tokens, err := readTokens(cfg)
	if err != nil {
		return nil, err
	}
	s := &tokenSource{cfg: cfg, keys: apitoken.NewKeyring(tokens), logger: logger, hangup: make(chan os.Signal, 1)}
	signal.Notify(s.hangup, syscall.SIGHUP)
	return s, nil
}

func readTokens(cfg config.HTTP) ([]apitoken.Token, error) {
	tokens := apitoken.Legacy(cfg.Tokens)
	if cfg.TokenFile != "" {
		fromFile, err := apitoken.LoadFile(cfg.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("http.token_file: %w", err)
		}
		tokens = append(tokens, fromFile...)
	}
	return tokens, nil
}

// Run re-reads the tokens on every SIGHUP until ctx ends. A file that no longer
// reads leaves the tokens in force as they were, and says why.
func (s *tokenSource) Run(ctx context.Context) error {
	defer signal.Stop(s.hangup)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.hangup:
		}
		if s.cfg.TokenFile == "" {
			s.logger.WarnContext(ctx, "SIGHUP received, but there is no http.token_file to re-read")
			continue
		}
		tokens, err := readTokens(s.cfg)
		if err != nil {
			s.logger.ErrorContext(ctx, "re-reading the API tokens failed; the previous tokens stay in force", "err", err)
			continue
		}
		s.keys.Replace(tokens)
		s.logger.InfoContext(ctx, "re-read the API tokens", "path", s.cfg.TokenFile, "tokens", len(tokens))
	}
}

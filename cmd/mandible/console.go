package main

import (
	"crypto/rand"
	"log/slog"
	"net/http"

	"github.com/mantis-deploy/mantis/internal/codec"
	"github.com/mantis-deploy/mantis/internal/mandible/apitoken"
	"github.com/mantis-deploy/mantis/internal/mandible/console"
	"github.com/mantis-deploy/mantis/internal/mandible/httpapi"
)

// consoleSessions returns the console's sessions. With the codec's keyring the key is
// derived from it, so replicas that share the keyring accept each other's sessions;
// without one each replica signs with a random key of its own and a session lasts
// as long as the process (and reaches only that replica).
func consoleSessions(c *codec.Codec, keys *apitoken.Keyring, logger *slog.Logger) *httpapi.Sessions {
	if c != nil {
		return httpapi.NewSessions(c.DeriveKey("console sessions"), keys, 0)
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key) // crypto/rand.Read does not fail (it crashes the program instead)
	logger.Info("console sessions are signed with a key of this process (no codec keyring): they end when it stops")
	return httpapi.NewSessions(key, keys, 0)
}

// withConsole serves the operator's console under console.Prefix next to h.
func withConsole(h http.Handler, sessions *httpapi.Sessions, keys *apitoken.Keyring, limiter *httpapi.AuthLimiter, logger *slog.Logger) http.Handler {
	ui := console.New(console.Options{Sessions: sessions, Keys: keys, Logger: logger, AuthLimiter: limiter})
	mux := http.NewServeMux()
	mux.Handle(console.Prefix, ui)
	mux.Handle(console.Prefix+"/", ui)
	mux.Handle("/", h)
	return mux
}

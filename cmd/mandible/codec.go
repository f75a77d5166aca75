package main

import (
	"log/slog"
	"net/http"

	"github.com/mantis-deploy/mantis/internal/codec"
	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/mandible/apitoken"
	"github.com/mantis-deploy/mantis/internal/mandible/httpapi"
)

// withCodecEndpoint serves the payload codec's endpoint and its sign-in page next to
// api, when payloads are encrypted; api alone otherwise.
func withCodecEndpoint(api http.Handler, cfg config.Mandible, c *codec.Codec, keys *apitoken.Keyring, sessions *httpapi.Sessions, limiter *httpapi.AuthLimiter, logger *slog.Logger) http.Handler {
	if c == nil {
		return api
	}
	endpoint := httpapi.NewCodecEndpoint(httpapi.CodecOptions{
		Codec:       c,
		Keys:        keys,
		UIURL:       cfg.Temporal.UIURL,
		SessionKey:  c.DeriveKey("codec endpoint sessions"),
		Logger:      logger,
		Console:     sessions,
		AuthLimiter: limiter,
		// The SDK's handler reads a body whole: bound it.
		MaxBodyBytes: cfg.HTTP.MaxCodecBodyBytes,
	})
	mux := http.NewServeMux()
	mux.Handle(httpapi.CodecPrefix+"/", endpoint)
	mux.Handle(httpapi.SignInPath, endpoint)
	mux.Handle("/", api)
	return mux
}

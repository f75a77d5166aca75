package httpapi

import (
	"log/slog"
	"net/http"

	"go.temporal.io/sdk/client"

	"github.com/mantis-deploy/mantis/internal/contract/api"
)

// RouteScope is a route of the API as the contract tests see it.
type RouteScope struct {
	Pattern string
	Scope   string // "" for a route that needs no token
}

// Routes lists every route New serves when it has a Temporal client, a registry and
// an event stream handler, with the scope each needs; the event streams' own routes
// are internal/mandible/sse's.
func Routes(temporal client.Client) []RouteScope {
	s := &server{temporal: temporal}
	var out []RouteScope
	for _, rt := range s.apiRoutes(nil) {
		out = append(out, RouteScope{Pattern: rt.pattern, Scope: string(rt.scope)})
	}
	for _, p := range []string{"GET /healthz", "GET /readyz", "GET /version", "GET /metrics", "GET " + api.OpenAPIPath, "GET " + api.DeploymentSpecSchemaPath} {
		out = append(out, RouteScope{Pattern: p})
	}
	return out
}

// WriteServerError is writeServerError with a discarding logger.
func WriteServerError(w http.ResponseWriter, r *http.Request, err error) {
	writeServerError(w, r, slog.New(slog.DiscardHandler), err)
}

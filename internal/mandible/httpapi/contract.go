package httpapi

import (
	"net/http"

	apidoc "github.com/mantis-deploy/mantis/api"
	"github.com/mantis-deploy/mantis/internal/contract/api"
)

// routeContract serves the API's description on mux, without a token: the
// OpenAPI document and the JSON Schema of a deployment spec, the committed files
// as they were embedded.
func routeContract(mux *http.ServeMux) {
	mux.HandleFunc("GET "+api.OpenAPIPath, serveDocument(api.OpenAPIContentType, apidoc.OpenAPI))
	mux.HandleFunc("GET "+api.DeploymentSpecSchemaPath, serveDocument(api.SchemaContentType, apidoc.DeploymentSpecSchema))
}

// serveDocument answers with body as it is, of contentType.
func serveDocument(contentType string, body []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.Header().Set("Cache-Control", "public, max-age=300")
		_, _ = w.Write(body)
	}
}

package httpapi_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"

	apidoc "github.com/mantis-deploy/mantis/api"
	"github.com/mantis-deploy/mantis/internal/contract/api"
)

// loadDocument loads api/openapi.yaml as Mandible serves it, resolving the
// create body's reference to the deployment spec's schema at the path Mandible
// serves that at, and validates it.
func loadDocument(t *testing.T) *openapi3.T {
	t.Helper()
	loader := openapi3.NewLoader()
	loader.ReadFromURIFunc = func(_ *openapi3.Loader, u *url.URL) ([]byte, error) {
		require.Equal(t, api.DeploymentSpecSchemaPath, u.Path, "the document refers to another file")
		return apidoc.DeploymentSpecSchema, nil
	}
	doc, err := loader.LoadFromDataWithPath(apidoc.OpenAPI, &url.URL{Path: api.OpenAPIPath})
	require.NoError(t, err)
	require.NoError(t, doc.Validate(context.Background()))
	require.True(t, doc.IsOpenAPI31OrLater())
	return doc
}

// operations maps "METHOD /path" to each operation of the document.
func operations(doc *openapi3.T) map[string]*openapi3.Operation {
	out := map[string]*openapi3.Operation{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			out[method+" "+path] = op
		}
	}
	return out
}

// docPath is a ServeMux pattern's path in the document's form: the same, as both
// write parameters {name}.
func docPath(pattern string) string {
	_, path, _ := strings.Cut(pattern, " ")
	return path
}

// scopeOf is the scope an operation's security requirement names, "" when it needs
// no token.
func scopeOf(doc *openapi3.T, op *openapi3.Operation) string {
	reqs := doc.Security
	if op.Security != nil {
		reqs = *op.Security
	}
	for _, req := range reqs {
		if scopes, ok := req["bearerAuth"]; ok && len(scopes) == 1 {
			return scopes[0]
		}
	}
	return ""
}

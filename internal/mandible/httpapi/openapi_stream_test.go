package httpapi_test

import (
	"mime"
	"net/http"
	"slices"
	"testing"

	"github.com/getkin/kin-openapi/routers"
	"github.com/stretchr/testify/require"
)

// requireDocumentedContentType checks that a stream's answer has a content type
// the document gives the operation's answer of that status. The validation of
// the answer does not look at it once the body is excluded, which a stream's must
// be (it does not end).
func requireDocumentedContentType(t *testing.T, route *routers.Route, resp *http.Response) {
	t.Helper()
	documented := route.Operation.Responses.Status(resp.StatusCode)
	require.NotNil(t, documented, "%s %s: no %d answer in the document", route.Method, route.Path, resp.StatusCode)
	var types []string
	for mt := range documented.Value.Content {
		types = append(types, mt)
	}
	slices.Sort(types)
	got, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	require.NoError(t, err, "%s %s: Content-Type %q", route.Method, route.Path, resp.Header.Get("Content-Type"))
	require.Contains(t, types, got, "%s %s answered %d as %s, documented as %v",
		route.Method, route.Path, resp.StatusCode, got, types)
}

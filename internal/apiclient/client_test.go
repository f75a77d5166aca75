package apiclient_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/api"
	"github.com/mantis-deploy/mantis/internal/apiclient"
)

// An error answer becomes an *apiclient.Error with the HTTP status and the
// problem's code, whether Mandible wrote a problem detail or the older shape.
func TestErrorCarriesStatusAndCode(t *testing.T) {
	t.Parallel()
	answers := map[string]string{
		"/problem": `{"type":"https://mantis.dev/problems/not_found","title":"Not found","status":404,"detail":"no deployment x","instance":"/problem","code":"not_found","error":{"code":"not_found","message":"no deployment x"}}`,
		"/older":   `{"error":{"code":"not_found","message":"no deployment x"}}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", api.ProblemContentType)
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(answers[r.URL.Path]))
	}))
	t.Cleanup(srv.Close)
	c := apiclient.New(srv.URL, "t")
	for path := range answers {
		err := c.Do(context.Background(), http.MethodGet, path, nil, nil)
		var apiErr *apiclient.Error
		require.True(t, errors.As(err, &apiErr), path)
		require.Equal(t, http.StatusNotFound, apiErr.Status, path)
		require.Equal(t, api.CodeNotFound, apiErr.Code, path)
		require.Equal(t, "no deployment x", apiErr.Problem.Detail, path)
		require.Equal(t, "no deployment x (HTTP 404)", err.Error(), path)
	}
}

package apiclient_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/apiclient"
	"github.com/mantis-deploy/mantis/internal/contract/api"
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

// A collection lists from its list answer, gets, creates and deletes by an escaped
// name, each with its method and path.
func TestCollectionCallsItsPaths(t *testing.T) {
	t.Parallel()
	var calls []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls = append(calls, r.Method+" "+r.URL.EscapedPath())
		switch r.Method {
		case http.MethodGet:
			if r.URL.Path == "/api/v1/limits" {
				_, _ = w.Write([]byte(`{"limits":[{"name":"a","max_running":2}]}`))
				return
			}
			_, _ = w.Write([]byte(`{"name":"a b/c","max_running":3}`))
		case http.MethodPost:
			_, _ = w.Write([]byte(`{"name":"n","max_running":4}`))
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	t.Cleanup(srv.Close)
	c, ctx := apiclient.New(srv.URL, "t"), context.Background()

	list, err := apiclient.Limits.List(c, ctx)
	require.NoError(t, err)
	require.Equal(t, []api.Limit{{Name: "a", MaxRunning: 2}}, list)
	got, err := apiclient.Limits.Get(c, ctx, "a b/c")
	require.NoError(t, err)
	require.Equal(t, 3, got.MaxRunning)
	stored, err := apiclient.Limits.Create(c, ctx, api.Limit{Name: "n", MaxRunning: 4})
	require.NoError(t, err)
	require.Equal(t, 4, stored.MaxRunning)
	require.NoError(t, apiclient.Freezes.Delete(c, ctx, "a b/c"))
	require.Equal(t, []string{
		"GET /api/v1/limits", "GET /api/v1/limits/a%20b%2Fc", "POST /api/v1/limits", "DELETE /api/v1/freezes/a%20b%2Fc",
	}, calls)
}

package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/contract/api"
)

// problemOf calls the API and decodes its answer as a problem detail, requiring the
// problem+json content type.
func (b apiBundle) problemOf(t *testing.T, method, path, body string, auth bool) (*http.Response, api.Problem) {
	t.Helper()
	req, err := http.NewRequest(method, b.srv.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	if auth {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, api.ProblemContentType, resp.Header.Get("Content-Type"))
	var p api.Problem
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&p))
	return resp, p
}

// Every error answer is an RFC 9457 problem: type, title, status, detail and the
// request's path as instance, with the code and the fields at fault as extension
// members, and the former error member kept for older clients.
func TestErrorsAreProblemDetails(t *testing.T) {
	t.Parallel()
	b := setup(t)
	resp, p := b.problemOf(t, http.MethodPost, "/api/v1/targets", `{"name":"db 1","mode":"listen"}`, true)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Equal(t, "https://mantis.dev/problems/invalid_argument", p.Type)
	require.Equal(t, api.CodeInvalidArgument.Title(), p.Title)
	require.Equal(t, http.StatusBadRequest, p.Status)
	require.Equal(t, "/api/v1/targets", p.Instance)
	require.Equal(t, api.CodeInvalidArgument, p.Code)
	require.NotEmpty(t, p.Detail)
	require.Contains(t, p.Fields, api.FieldProblem{Field: "address", Problem: "required for listen-mode targets"})
	require.Equal(t, api.ErrorDetail{Code: p.Code, Message: p.Detail, Fields: p.Fields}, p.Error)

	resp, p = b.problemOf(t, http.MethodGet, "/api/v1/targets", "", false)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Equal(t, api.CodeUnauthenticated, p.Code)
	require.Equal(t, http.StatusUnauthorized, p.Status)
}

// A routed path asked with another method is 405 with an Allow header, with or
// without a token; a path nobody routes is 404.
func TestWrongMethodIsMethodNotAllowed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cases := []struct{ method, path, allow string }{
		{http.MethodDelete, "/api/v1/targets", "GET, HEAD, POST"},
		{http.MethodPut, "/api/v1/targets/web-1", "GET, HEAD, DELETE"},
		{http.MethodPut, "/api/v1/dispatch-requests", "GET, HEAD, POST"},
		{http.MethodGet, "/api/v1/dlq/purge", "POST"},
		{http.MethodPost, "/api/v1/openapi.yaml", "GET, HEAD"},
	}
	for _, c := range cases {
		for _, auth := range []bool{true, false} {
			resp, p := b.problemOf(t, c.method, c.path, "", auth)
			require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, "%s %s", c.method, c.path)
			require.Equal(t, c.allow, resp.Header.Get("Allow"), "%s %s", c.method, c.path)
			require.Equal(t, api.CodeMethodNotAllowed, p.Code)
			require.Equal(t, c.path, p.Instance)
		}
	}
	resp, p := b.problemOf(t, http.MethodGet, "/api/v1/nothing", "", true)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.Equal(t, api.CodeNotFound, p.Code)
	require.Empty(t, resp.Header.Get("Allow"))
}

package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"

	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/mandible/httpapi"
)

// A server Mandible depends on that did not answer in time or is overloaded gives
// 503 with Retry-After, naming it; any other failure stays a 500 that leaks nothing.
func TestServerErrorsOfUnavailableDependenciesAre503(t *testing.T) {
	cases := []struct {
		err    error
		status int
		names  string
	}{
		{serviceerror.NewUnavailable("frontend restarting"), http.StatusServiceUnavailable, "Temporal"},
		{serviceerror.NewResourceExhaustedf(0, "namespace rate limit"), http.StatusServiceUnavailable, "Temporal"},
		{serviceerror.NewDeadlineExceeded("timeout"), http.StatusServiceUnavailable, "Temporal"},
		{fmt.Errorf("creating schedule: %w", serviceerror.NewUnavailable("x")), http.StatusServiceUnavailable, "Temporal"},
		{&pgconn.ConnectError{Config: &pgconn.Config{}}, http.StatusServiceUnavailable, "PostgreSQL"},
		{fmt.Errorf("inserting: %w", context.DeadlineExceeded), http.StatusServiceUnavailable, "depends on"},
		{serviceerror.NewInternal("boom"), http.StatusInternalServerError, ""},
		{errors.New("secret detail"), http.StatusInternalServerError, ""},
	}
	for _, c := range cases {
		rec := httptest.NewRecorder()
		httpapi.WriteServerError(rec, httptest.NewRequest(http.MethodPost, "/api/v1/schedules", nil), c.err)
		require.Equal(t, c.status, rec.Code, "%v", c.err)
		var p api.Problem
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &p))
		require.NotContains(t, p.Detail, "secret detail")
		if c.status == http.StatusServiceUnavailable {
			require.Equal(t, api.CodeUnavailable, p.Code, "%v", c.err)
			require.Contains(t, p.Detail, c.names, "%v", c.err)
			require.Equal(t, "1", rec.Header().Get("Retry-After"))
		} else {
			require.Equal(t, api.CodeInternal, p.Code)
			require.Empty(t, rec.Header().Get("Retry-After"))
		}
	}
}

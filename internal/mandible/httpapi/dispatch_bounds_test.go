package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// A raw dispatch request may not run longer than a deployment step may (24 h): a
// timeout above it, up to near MaxInt64 where a holder's deadline overflows, is
// refused with 400 naming the field; a day exactly is accepted.
func TestRawDispatchTimeoutAboveStepMaximumIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	code, _ := b.do(t, http.MethodPost, "/api/v1/targets", `{"name":"web-1","mode":"poll"}`, true)
	require.Equal(t, http.StatusOK, code)

	for _, timeout := range []string{"25h", "2562047h47m16s"} {
		code, body := b.do(t, http.MethodPost, "/api/v1/dispatch-requests",
			`{"requests":[{"idempotency_key":"long-`+timeout+`","target":"web-1","command":"uptime","timeout":"`+timeout+`"}]}`, true)
		require.Equal(t, http.StatusBadRequest, code, "timeout %s: %v", timeout, body)
		require.Contains(t, fields(t, body)["requests[0].timeout"], "must be at most 24h0m0s", body)
	}

	code, body := b.do(t, http.MethodPost, "/api/v1/dispatch-requests",
		`{"requests":[{"idempotency_key":"a-day","target":"web-1","command":"uptime","timeout":"24h"}]}`, true)
	require.Equal(t, http.StatusAccepted, code, body)
}

package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/stretchr/testify/require"
)

// A request's method is a token of the client's choosing: outside the standard
// methods it is counted as "other", so no client can add series at will.
func TestNonStandardMethodsAreCountedAsOther(t *testing.T) {
	t.Parallel()
	b := setupMiddleware(t)
	for _, method := range []string{"BREW", "PROPFIND", "get", "X-ANYTHING-0123456789", http.MethodGet, http.MethodDelete} {
		req, err := http.NewRequestWithContext(context.Background(), method, b.srv.URL+"/healthz", nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
	}

	counts := requestCounts(t, b.registry)
	require.Equal(t, float64(1), counts["/healthz GET 2xx"])
	var other float64
	for key, n := range counts {
		method := strings.Fields(key)[1]
		require.Contains(t, []string{"GET", "DELETE", "other"}, method, "series %q", key)
		if method == "other" {
			other += n
		}
	}
	require.Equal(t, float64(4), other, "four non-standard methods, counted as other: %v", counts)

	families, err := b.registry.Gather()
	require.NoError(t, err)
	problems, err := promlint.NewWithMetricFamilies(families).Lint()
	require.NoError(t, err)
	require.Empty(t, problems, "the API's metric families pass promlint")
}

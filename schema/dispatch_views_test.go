package schema_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/schema"
)

func TestListExplainsWhyRequestsArePending(t *testing.T) {
	t.Parallel()
	b := setupDispatch(t, "web-1")
	b.allowParallel(t) // many requests on one target at once
	b.addTarget(t, "lonely", nil)
	b.enqueue(t, req("served", "web-1", "normal"), req("unserved", "lonely", "normal"), req("claimed", "web-1", "high"))
	_, err := schema.ClaimPending(b.ctx, b.pool, replica, 1) // takes the high one
	require.NoError(t, err)

	views, err := schema.ListDispatchRequests(b.ctx, b.pool, schema.DispatchRequestFilter{}, time.Hour)
	require.NoError(t, err)
	reasons := map[string]string{}
	for _, v := range views {
		reasons[v.IdempotencyKey] = v.Reason
	}
	require.Contains(t, reasons["served"], "waiting for a replica to claim it")
	require.Contains(t, reasons["unserved"], "no live Thorax for target lonely")
	require.Contains(t, reasons["claimed"], "claimed by replica "+replica)

	pendingOnly, err := schema.ListDispatchRequests(b.ctx, b.pool, schema.DispatchRequestFilter{Statuses: []string{"pending"}}, time.Hour)
	require.NoError(t, err)
	require.Len(t, pendingOnly, 2)
}

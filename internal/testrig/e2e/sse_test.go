package e2e_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// readEvents reads up to n events from a deployment's stream, resuming after lastID,
// and returns their ids and whether the deployment ended.
func readEvents(t *testing.T, r *replica, id string, lastID int64, n int) ([]int64, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.HTTPAddr+"/sse/deployments/"+id, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+apiToken)
	if lastID > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(lastID, 10))
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close() // disconnects mid-stream
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	var ids []int64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "id: "); ok {
			n64, err := strconv.ParseInt(v, 10, 64)
			require.NoError(t, err)
			ids = append(ids, n64)
		}
		if v, ok := strings.CutPrefix(line, "event: "); ok && (v == "deployment.succeeded" || v == "deployment.failed") {
			return ids, true
		}
		if len(ids) == n && line == "" {
			return ids, false
		}
	}
	return ids, false
}

// A client that disconnects mid-deployment and resumes with Last-Event-ID receives
// every event exactly once, in order.
func TestSSEResumeDeliversEveryEventOnce(t *testing.T) {
	f := setupDispatchFixture(t, 12)
	r := startReplica(t, replicaOptions{ID: uniqueName("sse"), DatabaseURL: f.url, Temporal: f.temporal, PollInterval: "1s"})
	fakeExecutor(t, f, f.targets)
	names := make([]string, len(f.targets))
	for i, n := range f.targets {
		names[i] = strconv.Quote(n)
	}
	spec := fmt.Sprintf(`{"name":"streamed","max_parallel":3,"targets":[%s],"steps":[
		{"name":"one","command":"echo one"},{"name":"two","command":"echo two"},{"name":"three","command":"echo three"}]}`,
		strings.Join(names, ","))
	code, created := api(t, r, http.MethodPost, "/api/v1/deployments", spec)
	require.Equal(t, http.StatusAccepted, code, created)
	id := created["id"].(string)

	var got []int64
	var last int64
	for round := 0; round < 200; round++ {
		ids, done := readEvents(t, r, id, last, 7)
		got = append(got, ids...)
		if len(ids) > 0 {
			last = ids[len(ids)-1]
		}
		if done {
			break
		}
	}
	rows, err := f.pool.Query(f.ctx, `SELECT id FROM deployment_events WHERE deployment_id = $1 ORDER BY id`, uuid.MustParse(id))
	require.NoError(t, err)
	var want []int64
	for rows.Next() {
		var v int64
		require.NoError(t, rows.Scan(&v))
		want = append(want, v)
	}
	require.Greater(t, len(want), 7*3, "the deployment spans several reconnects")
	require.Equal(t, want, got, "every event once, in order, across reconnects")
}

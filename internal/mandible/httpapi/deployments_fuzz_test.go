package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/mantis-deploy/mantis/internal/mandible/httpapi"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

// FuzzCreateDeploymentBody posts any body, YAML or JSON, to POST /api/v1/deployments
// with a real Temporal client (no worker takes the workflows it starts): a refusal
// names its fields and writes nothing; an accepted deployment is recorded once, and an
// idempotent repeat records nothing new.
func FuzzCreateDeploymentBody(f *testing.F) {
	for _, s := range []string{
		`{"name":"rel","targets":["web-1"],"steps":[{"name":"s","command":"true"}]}`,
		`{"name":"rel","target_selector":{"role":"web"},"steps":[{"name":"s","command":"true"}],"idempotency_key":"k1"}`,
		"name: rel\ntargets: [web-1]\nsteps:\n  - name: s\n    command: echo hi\n    timeout: 90s\n",
		`{"name":"rel","targets":["nobody"],"steps":[{"name":"s","command":"true"}]}`,
		`{"name":"rel","target_selector":{"role":"none"},"steps":[{"name":"s","command":"true"}]}`,
		`{"name":"rel","targets":["web-1"],"steps":[{"name":"s","command":"a\u0000b","env":{"K":"v\u0000"}}]}`,
		`{"name":"rel","targets":["web-1"],"steps":[{"name":"s","command":"true","working_dir":"/a\u0000"}]}`,
		`{"name":"rel","targets":["web-1"],"steps":[]}`,
		`{"name":1}`, `[]`, `null`, ``, `{`, "name: [",
	} {
		f.Add([]byte(s))
	}
	api := newFuzzAPI(f, func(o *httpapi.Options) {
		tsrv := testenv.TemporalServer(f)
		tc, err := client.NewLazyClient(client.Options{HostPort: tsrv.Address, Namespace: tsrv.Namespace})
		require.NoError(f, err)
		f.Cleanup(tc.Close)
		o.Temporal, o.Namespace, o.DeploymentQueue = tc, tsrv.Namespace, tsrv.TaskQueue
	})
	_, err := api.pool.Exec(context.Background(), `INSERT INTO targets (name, mode, labels) VALUES ('web-1', 'poll', '{"role": "web"}')`)
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, body []byte) {
		before := api.fingerprint(t)
		countBefore := api.deployments(t)
		code, eb, raw := api.post(t, "/api/v1/deployments", body)
		switch code {
		case http.StatusAccepted, http.StatusOK:
		default:
			requireClearRefusal(t, code, eb, raw)
			require.Equal(t, before, api.fingerprint(t), "a refused deployment wrote: %s", raw)
			return
		}
		var created struct {
			ID      string `json:"id"`
			Created bool   `json:"created"`
		}
		require.NoError(t, json.Unmarshal(raw, &created))
		require.Equal(t, code == http.StatusAccepted, created.Created)
		want := countBefore
		if created.Created {
			want++
		}
		require.Equal(t, want, api.deployments(t), "an accepted deployment is recorded once")
	})
}

// deployments counts the recorded deployments.
func (a fuzzAPI) deployments(t *testing.T) int {
	t.Helper()
	var n int
	require.NoError(t, a.pool.QueryRow(context.Background(), `SELECT count(*) FROM deployments`).Scan(&n))
	return n
}

package e2e_test

import (
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Cancelling a deployment kills the commands already running on both kinds of agent:
// Thorax hears of the cancellation on its heartbeat and tells the listen-mode agent at
// once and the poll-mode agent on its next poll.
func TestCancelKillsRunningCommandsOnPollAndListenAgents(t *testing.T) {
	s := setupExec(t)
	r := s.mandible.replica
	dir := t.TempDir()
	spec := fmt.Sprintf(`{"name":"long","targets":[%q,%q],"steps":[
		{"name":"wait","command":"echo $$ > %s/$$.pid; exec sleep 300","timeout":"10m"},
		{"name":"after","command":"true"}]}`, s.poll.Name, s.listen.Name, dir)
	code, created := api(t, r, http.MethodPost, "/api/v1/deployments", spec)
	require.Equal(t, http.StatusAccepted, code, created)
	id := created["id"].(string)

	var pids []int
	require.Eventually(t, func() bool {
		files, _ := filepath.Glob(filepath.Join(dir, "*.pid"))
		if len(files) < 2 {
			return false
		}
		pids = pids[:0]
		for _, f := range files {
			pids = append(pids, readPIDFile(t, f))
		}
		return true
	}, commandTimeout, 100*time.Millisecond, "the commands never started on both agents")

	code, body := api(t, r, http.MethodPost, "/api/v1/deployments/"+id+"/cancel", "")
	require.Equal(t, http.StatusAccepted, code, body)
	d := waitDeployment(t, r, id, "cancelled")
	require.Equal(t, "skipped", d["steps"].([]any)[1].(map[string]any)["status"])
	for _, pid := range pids {
		require.Eventually(t, func() bool { return orphanGone(pid) }, 30*time.Second, 100*time.Millisecond,
			"the cancelled command %d is still running", pid)
	}
}

package chaos_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/agent/journal"
	"github.com/mantis-deploy/mantis/internal/testrig/faultenv"
)

// Shape of the journal-disk-full scenario.
const (
	// journalFSSize is the tmpfs the agent's journal lives on: room for a few
	// hundred entries, so only the filler can fill it.
	journalFSSize = 1 << 20
	// journalFullFor is how long the journal's filesystem stays full.
	journalFullFor = 20 * time.Second
	// journalWait bounds a deployment to the agent under test.
	journalWait = 3 * time.Minute
)

// The filesystem of a poll agent's journal (a 1 MiB tmpfs) fills up: the agent
// refuses new work with "journal unavailable: …" and runs nothing it could not
// journal; once there is room again it takes work again.
func TestAgentJournalDiskFull(t *testing.T) {
	full(t)
	var a *faultenv.Agent
	refusal := journal.ErrUnavailable.Error() + ": "
	preparedScenario(t, "agent journal disk full", "a poll agent's journal tmpfs (1 MiB) full for 20 s",
		faultenv.Options{}, faultenv.WorkloadOptions{},
		func(c *faultenv.Cluster) {
			a = firstAgent(t, c, "poll")
			// No command has run yet: the journal is empty, and the mount hides nothing.
			faultenv.MountSmallFS(t, a.JournalDir, journalFSSize)
		},
		func(sc *scene) (time.Time, faultenv.Rule) {
			release, err := faultenv.FillFilesystem(a.JournalDir)
			require.NoError(t, err)
			filled := time.Now()

			id, status := sc.c.SubmitAndWait([]string{a.Name}, journalWait)
			require.Equal(t, "failed", status, "deployment %s to %s while its journal is full", id, a.Name)
			refused := commandsOf(sc, id)
			require.NotEmpty(t, refused)
			for req, why := range refused {
				require.Contains(t, why, refusal, "request %s on %s", req, a.Name)
			}
			entries, err := sc.c.ReadLedger()
			require.NoError(t, err)
			for _, e := range entries {
				require.NotContains(t, refused, e.DispatchRequestID, "request %s ran without its journal entry", e.DispatchRequestID)
			}
			require.Contains(t, a.Log(), refusal, "the agent's log says why it refuses")

			<-time.After(time.Until(filled.Add(journalFullFor)))
			require.NoError(t, release())
			ended := time.Now()
			id, status = sc.c.SubmitAndWait([]string{a.Name}, journalWait)
			require.Equal(t, "succeeded", status, "deployment %s to %s once its journal has room again", id, a.Name)
			return ended, faultenv.RefusedOn(a.Name, refusal)
		})
}

// firstAgent is the cluster's first agent of mode.
func firstAgent(t *testing.T, c *faultenv.Cluster, mode string) *faultenv.Agent {
	t.Helper()
	for _, a := range c.Agents {
		if a.Mode == mode {
			return a
		}
	}
	t.Fatalf("the cluster has no %s agent", mode)
	return nil
}

// commandsOf maps the dispatch request of each command of deployment id to the
// command's error.
func commandsOf(sc *scene, id string) map[string]string {
	rows, err := sc.c.Pool.Query(sc.c.Ctx, `SELECT dispatch_request_id::text, coalesce(error, '')
		FROM command_queue WHERE deployment_id = $1`, id)
	require.NoError(sc.t, err)
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var req, why string
		require.NoError(sc.t, rows.Scan(&req, &why))
		out[req] = why
	}
	require.NoError(sc.t, rows.Err())
	return out
}

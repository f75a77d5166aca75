package main

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/mantis-deploy/mantis/internal/apiclient"
	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/mandible/httpapi"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

// fleetCLI is mantisctl against the real API on PostgreSQL and Temporal, with the
// common flags of an admin token.
func fleetCLI(t *testing.T) []string {
	t.Helper()
	pool := testenv.MigratedPool(t)
	tsrv := testenv.TemporalServer(t)
	tc, err := client.NewLazyClient(client.Options{HostPort: tsrv.Address, Namespace: tsrv.Namespace})
	require.NoError(t, err)
	t.Cleanup(tc.Close)
	srv := httptest.NewServer(httpapi.New(httpapi.Options{DB: pool, Tokens: []string{apiToken}, HeartbeatTimeout: time.Hour,
		Temporal: tc, Namespace: tsrv.Namespace, DeploymentQueue: tsrv.TaskQueue}))
	t.Cleanup(srv.Close)
	return []string{"--server", srv.URL, "--token-file", tokenFile(t), "--client-config", ""}
}

func writeSpec(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "spec.yaml")
	require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
	return path
}

const fleetSpec = "name: ship\ntarget_selector: {env: prod}\nrollout: {batches: [1, \"50%\"]}\nsteps:\n  - {name: install, command: \"true\"}\n"

// deploy --plan prints each batch's targets and the freeze that would refuse, and
// creates nothing; freeze create/list/delete manage the window; a frozen deploy is
// refused naming the freeze, and --override-freeze passes.
func TestFreezeAndPlanCommands(t *testing.T) {
	common := fleetCLI(t)
	for _, name := range []string{"web-1", "web-2", "web-3"} {
		_, err := runCLI(t, append([]string{"targets", "register", name, "--mode", "poll", "--label", "env=prod"}, common...)...)
		require.NoError(t, err)
	}
	out, err := runCLI(t, append([]string{"freeze", "create", "weekend", "--reason", "no weekend deploys", "--selector", "env=prod",
		"--days", "mon,tue,wed,thu,fri,sat,sun", "--from", "00:00", "--to", "00:00"}, common...)...)
	require.NoError(t, err, out)
	require.Contains(t, out, "freeze weekend created (active now: true)")
	out, err = runCLI(t, append([]string{"freeze", "list"}, common...)...)
	require.NoError(t, err)
	require.Contains(t, out, "env=prod")
	require.Contains(t, out, "mon,tue,wed,thu,fri,sat,sun 00:00-00:00 UTC")

	spec := writeSpec(t, fleetSpec)
	out, err = runCLI(t, append([]string{"deploy", "-f", spec, "--plan"}, common...)...)
	require.NoError(t, err, out)
	require.Contains(t, out, "batch 1 (1): web-1")
	require.Contains(t, out, "batch 2 (1): web-2")
	require.Contains(t, out, "batch 3 (1): web-3")
	require.Contains(t, out, "FROZEN by weekend (no weekend deploys)")
	out, err = runCLI(t, append([]string{"list", "-o", "json"}, common...)...)
	require.NoError(t, err)
	require.JSONEq(t, "[]", out, "the plan created nothing")

	// The spec with its rollout is what is deployed.
	_, err = runCLI(t, append([]string{"deploy", "-f", spec}, common...)...)
	var apiErr *apiclient.Error
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, api.CodeFrozen, apiErr.Code)
	require.ErrorContains(t, err, "no weekend deploys")
	out, err = runCLI(t, append([]string{"deploy", "-f", spec, "--override-freeze"}, common...)...)
	require.NoError(t, err, out)
	require.Contains(t, out, "created")

	out, err = runCLI(t, append([]string{"freeze", "delete", "weekend"}, common...)...)
	require.NoError(t, err)
	require.Contains(t, out, "deleted freeze weekend")
}

// schedule create/list/delete and webhook create/list/delete go through the API.
func TestScheduleAndWebhookCommands(t *testing.T) {
	common := fleetCLI(t)
	_, err := runCLI(t, append([]string{"targets", "register", "web-1", "--mode", "poll", "--label", "env=prod"}, common...)...)
	require.NoError(t, err)
	spec := writeSpec(t, "name: nightly\ntargets: [web-1]\nsteps:\n  - {name: s, command: \"true\"}\n")
	// Schedules live in the Temporal namespace every package's tests share: a name of
	// its own keeps another test's schedule out of this one.
	name := "nightly-" + uuid.NewString()[:8]
	out, err := runCLI(t, append([]string{"schedule", "create", name, "--spec", spec, "--cron", "0 3 * * *"}, common...)...)
	require.NoError(t, err, out)
	require.Contains(t, out, "schedule "+name+" created")
	out, err = runCLI(t, append([]string{"schedule", "list", "-o", "json"}, common...)...)
	require.NoError(t, err)
	var ss []api.Schedule
	require.NoError(t, json.Unmarshal([]byte(out), &ss))
	require.Len(t, ss, 1)
	require.Equal(t, "0 3 * * *", ss[0].Cron)
	require.NotEmpty(t, ss[0].NextRuns, "Temporal has computed the next run")
	require.Equal(t, 3, ss[0].NextRuns[0].UTC().Hour())
	_, err = runCLI(t, append([]string{"schedule", "create", "x", "--spec", spec}, common...)...)
	require.Error(t, err, "one of --cron and --every is needed")
	out, err = runCLI(t, append([]string{"schedule", "delete", name}, common...)...)
	require.NoError(t, err, out)

	t.Setenv(webhookSecretEnv, "0123456789abcdef-secret")
	out, err = runCLI(t, append([]string{"webhook", "create", "https://hooks.example/x", "--events", "deployment.*,step.failed", "-o", "json"}, common...)...)
	require.NoError(t, err, out)
	var hook api.Webhook
	require.NoError(t, json.Unmarshal([]byte(out), &hook))
	require.False(t, hook.AllowPrivateNetwork)
	out, err = runCLI(t, append([]string{"webhook", "create", "http://10.0.0.5/x", "--events", "step.failed", "--allow-private-network", "-o", "json"}, common...)...)
	require.NoError(t, err, out)
	var inside api.Webhook
	require.NoError(t, json.Unmarshal([]byte(out), &inside))
	require.True(t, inside.AllowPrivateNetwork, "the flag reaches the API")
	out, err = runCLI(t, append([]string{"webhook", "list"}, common...)...)
	require.NoError(t, err)
	require.Contains(t, out, "deployment.*,step.failed")
	out, err = runCLI(t, append([]string{"webhook", "failures", hook.ID.String()}, common...)...)
	require.NoError(t, err, out)
	_, err = runCLI(t, append([]string{"webhook", "delete", hook.ID.String()}, common...)...)
	require.NoError(t, err)
}

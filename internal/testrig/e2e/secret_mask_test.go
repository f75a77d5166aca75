package e2e_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/contract/events"
)

// maskedSecret is the env_secret of TestSecretEnvIsMaskedInOutputEverywhere.
const maskedSecret = "s3cret-masked-8e1f0a"

// A step that prints its secret env value, and the value's base64, on a poll and a
// listen agent: the deployment view, the deployment's /sse stream (its raw text and
// its target.output events decoded) and .../output show "***", never the value.
func TestSecretEnvIsMaskedInOutputEverywhere(t *testing.T) {
	t.Parallel()
	c, _ := setupSecretCluster(t)
	th := c.startThorax(t)
	poll := c.startPollAgent(t, th)
	instance := c.waitRegistered(t, th)
	c.waitPollTarget(t, poll, instance)
	listen := c.startListenAgent(t)
	c.registerListenTarget(t, listen)

	command := `echo token=$API_TOKEN; printf %s "$API_TOKEN" | base64; echo done`
	spec := fmt.Sprintf(`{"name":"masked","targets":[%q,%q],"steps":[{"name":"print","command":%q,
		"env_secret":{"API_TOKEN":%q}}]}`, poll.Name, listen.Name, command, maskedSecret)
	code, created := api(t, c.mandible.replica, http.MethodPost, "/api/v1/deployments", spec)
	require.Equal(t, http.StatusAccepted, code, created)
	require.NotContains(t, created, "warnings", "a secret long enough to mask draws no warning")
	id := created["id"].(string)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	raw := rawEvents(ctx, t, c.mandible.replica, id)
	stream := streamOutput(ctx, t, c.mandible.replica, id)

	streamed := map[string]string{}
	for ev := range stream {
		streamed[ev.data.Target] += string(ev.data.Data)
	}
	require.NoError(t, ctx.Err(), "the deployment's stream ended in time")
	waitDeployment(t, c.mandible.replica, id, "succeeded")
	const want = "token=***\n***\ndone\n"
	leaks := []string{maskedSecret, base64.StdEncoding.EncodeToString([]byte(maskedSecret))}
	for _, target := range []string{poll.Name, listen.Name} {
		require.Equal(t, want, streamed[target], "%s: the /sse target.output events", target)
		require.Equal(t, want, string(storedOutput(t, c.mandible.replica, id, target)), "%s: .../output", target)
	}
	view := string(rawAPI(t, c.mandible.replica, "/api/v1/deployments/"+id))
	require.Contains(t, view, `token=***\n***\ndone`, "the view shows the masked output tail")
	requireNoSecret(t, "the deployment view", view, leaks)
	requireNoSecret(t, "the /sse stream", <-raw, leaks)
}

// rawEvents reads a deployment's event stream from its start, as text, until the
// deployment ends or ctx does, and sends it whole.
func rawEvents(ctx context.Context, t *testing.T, r *replica, id string) <-chan string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.HTTPAddr+"/sse/deployments/"+id+"?last_event_id=0", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+apiToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	out := make(chan string, 1)
	go func() {
		defer resp.Body.Close()
		var b strings.Builder
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			b.WriteString(sc.Text())
			b.WriteByte('\n')
			if ev, ok := strings.CutPrefix(sc.Text(), "event: "); ok &&
				(ev == string(events.DeploymentSucceeded) || ev == string(events.DeploymentFailed)) {
				break
			}
		}
		out <- b.String()
	}()
	return out
}

package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	apitypes "github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/contract/events"
)

// liveOutputCommand prints eight lines over about two seconds, then bytes that are no
// text: a NUL and an invalid UTF-8 byte.
const liveOutputCommand = `for i in 1 2 3 4 5 6 7 8; do echo "line $i"; sleep 0.25; done; printf 'a\000b\377\n'`

// liveOutputWant is what liveOutputCommand prints.
var liveOutputWant = func() []byte {
	var b bytes.Buffer
	for i := 1; i <= 8; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	b.WriteString("a\x00b\xff\n")
	return b.Bytes()
}()

// sseOutput is one target.output event as a stream delivered it.
type sseOutput struct {
	id   int64
	data events.TargetOutputData
}

// streamOutput follows a deployment's event stream from its start and sends each
// target.output event on the returned channel until ctx ends or the deployment does.
func streamOutput(ctx context.Context, t *testing.T, r *replica, id string) <-chan sseOutput {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.HTTPAddr+"/sse/deployments/"+id+"?last_event_id=0", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+apiToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	out := make(chan sseOutput, 1000)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var ev sseOutput
		var typ string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				ev.id, _ = strconv.ParseInt(strings.TrimPrefix(line, "id: "), 10, 64)
			case strings.HasPrefix(line, "event: "):
				typ = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && typ == string(events.TargetOutput):
				if json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev.data) == nil {
					out <- ev
				}
			case line == "":
				if typ == string(events.DeploymentSucceeded) || typ == string(events.DeploymentFailed) {
					return
				}
				ev, typ = sseOutput{}, ""
			}
		}
	}()
	return out
}

// A command that prints over two seconds, on a poll-mode and a listen-mode agent: the
// deployment's event stream carries target.output events for each target while its
// command still runs (its result not stored yet), and the output, streamed and
// stored, is byte for byte what the command printed, NUL and invalid UTF-8 included.
func TestLiveOutputReachesTheStreamBeforeTheResult(t *testing.T) {
	t.Parallel()
	s := setupExec(t)
	spec := fmt.Sprintf(`{"name":"live","targets":[%q,%q],"steps":[{"name":"print","command":%q}]}`,
		s.poll.Name, s.listen.Name, liveOutputCommand)
	code, created := api(t, s.mandible.replica, http.MethodPost, "/api/v1/deployments", spec)
	require.Equal(t, http.StatusAccepted, code, created)
	id := created["id"].(string)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	stream := streamOutput(ctx, t, s.mandible.replica, id)

	streamed := map[string][]events.TargetOutputData{}
	liveSeen := map[string]bool{}
	for ev := range stream {
		target := ev.data.Target
		if len(streamed[target]) == 0 {
			// The first chunk of this target is on the stream: its command has no result yet.
			var status string
			require.NoError(t, s.pool.QueryRow(s.ctx, `SELECT status FROM command_queue WHERE id = $1`, ev.data.CommandID).Scan(&status))
			liveSeen[target] = status == "running"
		}
		streamed[target] = append(streamed[target], ev.data)
	}
	require.NoError(t, ctx.Err(), "the deployment's stream ended in time")
	waitDeployment(t, s.mandible.replica, id, "succeeded")
	for _, target := range []string{s.poll.Name, s.listen.Name} {
		require.True(t, liveSeen[target], "%s: output reached the stream while its command was still running", target)
		var got []byte
		for i, c := range streamed[target] {
			require.EqualValues(t, i, c.Seq, "%s: chunks in order, none lost", target)
			got = append(got, c.Data...)
		}
		require.Equal(t, liveOutputWant, got, "%s: streamed output byte for byte", target)
		require.Equal(t, liveOutputWant, storedOutput(t, s.mandible.replica, id, target), "%s: stored output byte for byte", target)
	}
}

// storedOutput reads a target's stored live output of a deployment through the API.
func storedOutput(t *testing.T, r *replica, id, target string) []byte {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+r.HTTPAddr+"/api/v1/deployments/"+id+"/output?step=0&target="+target, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+apiToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var page apitypes.OutputPage
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&page))
	slices.SortFunc(page.Chunks, func(a, b apitypes.OutputChunk) int { return int(a.Seq - b.Seq) })
	var out []byte
	for _, c := range page.Chunks {
		require.Equal(t, target, c.Target)
		out = append(out, c.Data...)
	}
	return out
}

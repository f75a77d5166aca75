package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/contract/events"
)

// outputAPI answers a deployment's stored output in two pages and an event stream
// that says reset, then repeats a stored chunk, brings a new one and ends the
// deployment.
type outputAPI struct {
	id, web1, web2 uuid.UUID
	loads          atomic.Int32
}

func (o *outputAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	step := 0
	chunk := func(cmd uuid.UUID, target string, seq int64, data string) api.OutputChunk {
		return api.OutputChunk{Target: target, Step: &step, CommandID: cmd, Seq: seq, Data: []byte(data)}
	}
	switch {
	case r.URL.Path == "/api/v1/deployments/"+o.id.String()+"/output" && r.URL.Query().Get("after") == "":
		o.loads.Add(1)
		api.WriteJSON(w, http.StatusOK, api.OutputPage{Chunks: []api.OutputChunk{
			chunk(o.web1, "web-1", 0, "one\ntw"), chunk(o.web2, "web-2", 0, "\x1b[31mred\x00\n"),
		}, Next: "/api/v1/deployments/" + o.id.String() + "/output?after=2"})
	case r.URL.Path == "/api/v1/deployments/"+o.id.String()+"/output":
		api.WriteJSON(w, http.StatusOK, api.OutputPage{Chunks: []api.OutputChunk{chunk(o.web1, "web-1", 1, "o\n")}})
	case r.URL.Path == "/sse/deployments/"+o.id.String():
		w.Header().Set("Content-Type", "text/event-stream")
		send := func(id int, typ events.Type, data any) {
			b, _ := json.Marshal(data)
			fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", id, typ, b)
		}
		send(10, events.Reset, events.ResetData{PrunedThrough: 10})
		send(11, events.TargetOutput, events.TargetOutputData{Target: "web-1", Step: &step, CommandID: o.web1, Seq: 1, Data: []byte("o\n")})
		send(12, events.TargetOutput, events.TargetOutputData{Target: "web-1", Step: &step, CommandID: o.web1, Seq: 2, Data: []byte("three\nfour")})
		send(13, events.DeploymentSucceeded, events.DeploymentEndedData{Status: "succeeded"})
	default:
		api.WriteError(w, r, http.StatusNotFound, api.CodeNotFound, "no route "+r.URL.Path)
	}
}

// logs prints stored output as prefixed lines, whole lines across chunks and pages,
// terminal-safe; -f follows the stream, reloads on reset without printing anything
// twice, and prints the line left without its end.
func TestLogsPrintsPrefixedLinesAndFollowsThroughAReset(t *testing.T) {
	t.Parallel()
	o := &outputAPI{id: uuid.New(), web1: uuid.New(), web2: uuid.New()}
	srv := httptest.NewServer(o)
	t.Cleanup(srv.Close)

	r := mantisctl(t, against(t, srv.URL, "logs", o.id.String())...)
	requireCode(t, ExitOK, r)
	require.Equal(t, "web-1 | one\nweb-2 | \\x1b[31mred\u2400\nweb-1 | two\n", r.stdout)

	r = mantisctl(t, against(t, srv.URL, "logs", o.id.String(), "-f")...)
	requireCode(t, ExitOK, r)
	require.Equal(t, "web-1 | one\nweb-2 | \\x1b[31mred\u2400\nweb-1 | two\nweb-1 | three\nweb-1 | four\n", r.stdout)
	require.EqualValues(t, 3, o.loads.Load(), "one load each, and one more for the reset")

	r = mantisctl(t, against(t, srv.URL, "logs", "not-an-id")...)
	requireCode(t, ExitUsage, r)
	require.True(t, strings.Contains(r.stderr, "deployment UUID"), r.stderr)
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/broker"
	"github.com/mantis-deploy/mantis/internal/contract/api"
)

// dlqAPI stands in for Mandible's /api/v1/dlq routes (internal/mandible/httpapi serves
// them over a real broker; internal/testrig/e2e runs this CLI against a real
// Mandible): it answers with a fixed listing and records what it was asked.
type dlqAPI struct {
	mu       sync.Mutex
	listing  broker.DLQListing
	requests []string // "METHOD path body"
}

func (a *dlqAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+apiToken {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	body, _ := io.ReadAll(r.Body)
	a.mu.Lock()
	a.requests = append(a.requests, strings.TrimSpace(r.Method+" "+r.URL.RequestURI()+" "+string(body)))
	listing := a.listing
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch r.Method + " " + r.URL.Path {
	case "GET /api/v1/dlq":
		if r.URL.Query().Get("limit") == "0" {
			listing.Messages = nil
		}
		_ = json.NewEncoder(w).Encode(listing)
	case "POST /api/v1/dlq/requeue":
		var req api.DLQRequeueBody
		_ = json.Unmarshal(body, &req)
		_ = json.NewEncoder(w).Encode(api.DLQRequeueResult{Requeued: 2, To: req.To, Queue: broker.CommandQueue(req.To)})
	case "POST /api/v1/dlq/purge":
		_ = json.NewEncoder(w).Encode(api.DLQPurgeResult{Purged: listing.Depth})
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

func (a *dlqAPI) asked() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.requests...)
}

func startDLQAPI(t *testing.T) (*dlqAPI, string) {
	t.Helper()
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	api := &dlqAPI{listing: broker.DLQListing{Queue: broker.DeadLetterQ, Depth: 7, Messages: []broker.DLQMessage{
		{
			RoutingKey: "command.listen.high", Body: `{...}`, BodyEncoding: "utf-8",
			Nudge:  &broker.Nudge{CommandID: "0190b3c4-1c5e-7d2a-9b1e-3f4a5b6c7d8e", Target: "web-1", Mode: "listen", Priority: "high", MaxRetries: 3},
			Deaths: []broker.Death{{Queue: broker.HighQueue, Reason: "rejected", Count: 2, Time: at}},
		},
		{
			RoutingKey: "command.poll.low", Body: "garbage", BodyEncoding: "utf-8", Problem: "decoding nudge: invalid character 'g'",
			Deaths: []broker.Death{{Queue: broker.LowQueue, Reason: "rejected", Count: 1}, {Queue: broker.LowQueue, Reason: "expired", Count: 1}},
		},
	}}}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return api, srv.URL
}

// runDLQ runs `mantisctl dlq args...` with the global flags, reading stdin
// from in.
func runDLQ(t *testing.T, url, in string, args ...string) (string, error) {
	t.Helper()
	root := newRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetIn(strings.NewReader(in))
	root.SetArgs(append(append([]string{"dlq"}, args...), "--server", url, "--token-file", tokenFile(t), "--client-config", ""))
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

func TestDLQListShowsDeathReasons(t *testing.T) {
	api, url := startDLQAPI(t)
	out, err := runDLQ(t, url, "", "list", "--limit", "5")
	require.NoError(t, err)
	require.Equal(t, []string{"GET /api/v1/dlq?limit=5"}, api.asked())
	require.Contains(t, out, "mantis.dlq holds 7 message(s); showing 2.")
	require.Contains(t, out, "0190b3c4-1c5e-7d2a-9b1e-3f4a5b6c7d8e")
	require.Contains(t, out, "rejected from mantis.commands.priority.high x2 (last ")
	require.Contains(t, out, "rejected from mantis.commands.priority.low x1; expired from mantis.commands.priority.low x1")
	require.Contains(t, out, "#2 is not a nudge: decoding nudge: invalid character 'g'")

	out, err = runDLQ(t, url, "", "list", "-o", "json")
	require.NoError(t, err)
	var listing broker.DLQListing
	require.NoError(t, json.Unmarshal([]byte(out), &listing))
	require.Equal(t, 7, listing.Depth)
	require.Equal(t, "rejected", listing.Messages[0].Deaths[0].Reason)
}

func TestDLQRequeueSendsPriorityAndLimit(t *testing.T) {
	api, url := startDLQAPI(t)
	out, err := runDLQ(t, url, "", "requeue", "--to", "high", "--limit", "2")
	require.NoError(t, err)
	require.Equal(t, []string{`POST /api/v1/dlq/requeue {"to":"high","limit":2}`}, api.asked())
	require.Equal(t, "requeued 2 message(s) from mantis.dlq to mantis.commands.priority.high\n", out)

	_, err = runDLQ(t, url, "", "requeue", "--to", "urgent")
	require.ErrorContains(t, err, "--to: must be high, normal or low")
	_, err = runDLQ(t, url, "", "requeue")
	require.ErrorContains(t, err, `required flag(s) "to" not set`)
	require.Len(t, api.asked(), 1, "refused flags never reach Mandible")
}

func TestDLQPurgeAsksForConfirmation(t *testing.T) {
	api, url := startDLQAPI(t)

	out, err := runDLQ(t, url, "no\n", "purge")
	require.ErrorIs(t, err, errNotConfirmed)
	require.Contains(t, out, "Drop all 7 message(s) in mantis.dlq for good? Type yes to purge: ")
	_, err = runDLQ(t, url, "", "purge")
	require.ErrorContains(t, err, "pass --yes to purge without asking")
	require.Equal(t, []string{"GET /api/v1/dlq?limit=0", "GET /api/v1/dlq?limit=0"}, api.asked(), "nothing purged unconfirmed")

	out, err = runDLQ(t, url, "yes\n", "purge")
	require.NoError(t, err)
	require.Contains(t, out, "purged 7 message(s) from mantis.dlq")
	require.Equal(t, `POST /api/v1/dlq/purge {"confirm":true}`, api.asked()[3])

	out, err = runDLQ(t, url, "", "purge", "--yes", "-o", "json")
	require.NoError(t, err)
	require.JSONEq(t, `{"purged":7}`, out)
	require.Equal(t, `POST /api/v1/dlq/purge {"confirm":true}`, api.asked()[4], "--yes asks nothing")
}

package soak

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// Shape of the dispatch load.
const (
	// DispatchPath is where the load enqueues its requests.
	DispatchPath = "/api/v1/dispatch-requests"
	// loadTick is how often the generator catches up with its rate.
	loadTick = 100 * time.Millisecond
	// maxBatch bounds the requests of one POST (a catch-up after a slow answer).
	maxBatch = 200
	// loadCommand is the trivial command every request runs.
	loadCommand = "true"
	// loadTimeout is each request's command timeout.
	loadTimeout = "60s"
	// postTimeout bounds one POST.
	postTimeout = 15 * time.Second
)

// Load enqueues dispatch requests at a steady rate through the HTTP API, spread
// over the targets and over the replicas, in batches.
type Load struct {
	// URLs are the replicas' API bases (http://host:port); each POST goes to the next.
	URLs []string
	// Token is the bearer token of the API.
	Token   string
	Targets []string
	// Rate is requests per second.
	Rate   int
	client *http.Client

	mu       sync.Mutex
	accepted int
	refused  int
	errors   int
	lastErr  string
}

// Run enqueues until ctx ends: at each tick, as many requests as keep the total at
// Rate per second since the start.
func (l *Load) Run(ctx context.Context) {
	l.client = &http.Client{Timeout: postTimeout}
	start := time.Now()
	tick := time.NewTicker(loadTick)
	defer tick.Stop()
	sent, post := 0, 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		due := int(time.Since(start).Seconds()*float64(l.Rate)) - sent
		for due > 0 && ctx.Err() == nil {
			n := min(due, maxBatch)
			l.post(ctx, l.URLs[post%len(l.URLs)], sent, n)
			sent, due, post = sent+n, due-n, post+1
		}
	}
}

// post sends requests first..first+n-1 in one batch.
func (l *Load) post(ctx context.Context, base string, first, n int) {
	type request struct {
		IdempotencyKey string `json:"idempotency_key"`
		Target         string `json:"target"`
		Command        string `json:"command"`
		Timeout        string `json:"timeout"`
	}
	reqs := make([]request, n)
	run := randomHex(6)
	for i := range reqs {
		reqs[i] = request{IdempotencyKey: fmt.Sprintf("soak-%s-%d", run, first+i),
			Target: l.Targets[(first+i)%len(l.Targets)], Command: loadCommand, Timeout: loadTimeout}
	}
	body, _ := json.Marshal(map[string]any{"requests": reqs})
	// The load's end must not abort a POST under way: the API may have taken it.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), postTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+DispatchPath, bytes.NewReader(body))
	if err != nil {
		l.record(0, n, err.Error())
		return
	}
	req.Header.Set("Authorization", "Bearer "+l.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := l.client.Do(req)
	if err != nil {
		l.record(0, n, err.Error())
		return
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusAccepted {
		l.record(resp.StatusCode, n, fmt.Sprintf("%s: %s", resp.Status, out))
		return
	}
	l.record(resp.StatusCode, n, "")
}

func (l *Load) record(code, n int, problem string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case problem == "":
		l.accepted += n
	case code != 0:
		l.refused += n
		l.lastErr = problem
	default:
		l.errors += n
		l.lastErr = problem
	}
}

// LoadTotals is what the API did with the load's requests.
type LoadTotals struct {
	Accepted, Refused, Failed int
	// LastProblem is the last refusal or transport error, if any.
	LastProblem string
}

// Totals returns the counts so far.
func (l *Load) Totals() LoadTotals {
	l.mu.Lock()
	defer l.mu.Unlock()
	return LoadTotals{Accepted: l.accepted, Refused: l.refused, Failed: l.errors, LastProblem: l.lastErr}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

package sse

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/schema"
)

// BenchmarkSSEFanOut delivers the same events to 1,000 SSE clients over loopback HTTP
// from Mantis (the log in PostgreSQL, the broker, the handler) and from a bare net/http
// broadcaster that fans out in-memory frames, in the same run, and reports the events
// delivered per second by each and their ratio (the goal is at least 0.5).
//
// The bare broadcaster runs twice: flushing after every event, as the simplest one
// does, and flushing once per run of queued events, as Mantis's handler does; the
// second is the like-for-like baseline. Mantis is timed from the commit of the
// transaction that inserts a round's events, so its figure includes reading them from
// the log (up to one poll interval).
func BenchmarkSSEFanOut(b *testing.B) {
	const (
		clients = 1000
		events  = 1000
	)
	data, err := json.Marshal(map[string]any{"target": "web-1", "stream": "stdout", "output": strings.Repeat("x", 128)})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	runBare := func(coalesce bool) float64 {
		bare := newBareBroadcaster(coalesce)
		srv := httptest.NewServer(bare)
		defer srv.Close()
		defer bare.close()
		return measureFanOut(ctx, b, srv.URL+"/", clients, events, func(round int) time.Time {
			start := time.Now()
			for i := range events {
				bare.publish(newFrame(schema.Event{ID: int64(round*events + i + 1), Type: "target.output", Data: data, CreatedAt: time.Now()}).bytes)
			}
			return start
		})
	}
	bareRate := runBare(false)
	coalescedRate := runBare(true)

	pool := testenv.MigratedPool(b)
	broker := NewBroker(BrokerOptions{DB: pool})
	runCtx, stop := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		_ = broker.Run(runCtx)
	}()
	mantisSrv := httptest.NewServer(NewHandler(broker, HandlerOptions{}))
	mantisRate := measureFanOut(ctx, b, mantisSrv.URL+"/sse/events", clients, events, func(int) time.Time {
		tx, err := pool.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, `INSERT INTO deployment_events (type, data) SELECT 'target.output', $1::jsonb FROM generate_series(1, $2)`, data, events); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if err := tx.Commit(ctx); err != nil {
			b.Fatal(err)
		}
		return start
	})
	stop()
	<-stopped
	mantisSrv.Close()

	b.ReportMetric(bareRate, "bare-events/s")
	b.ReportMetric(coalescedRate, "bare-coalesced-events/s")
	b.ReportMetric(mantisRate, "mantis-events/s")
	b.ReportMetric(mantisRate/bareRate, "mantis/bare")
	b.ReportMetric(mantisRate/coalescedRate, "mantis/bare-coalesced")
}

// measureFanOut connects n clients to url, then b.N times has publish send a round of
// events and waits until every client has all of them. It returns the events
// delivered per second, summed over the clients.
func measureFanOut(ctx context.Context, b *testing.B, url string, n, events int, publish func(round int) time.Time) float64 {
	b.Helper()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	transport := &http.Transport{MaxIdleConnsPerHost: -1, DisableKeepAlives: true}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport}

	live := make(chan error, n)
	rounds := make(chan struct{}, n)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for range n {
		wg.Go(func() {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				live <- err
				return
			}
			resp, err := client.Do(req)
			if err != nil {
				live <- err
				return
			}
			defer resp.Body.Close()
			r := bufio.NewReaderSize(resp.Body, 64<<10)
			seen, signalled := 0, false
			for {
				line, err := r.ReadSlice('\n')
				if err != nil {
					if !signalled {
						live <- fmt.Errorf("stream ended before going live: %w", err)
					}
					return
				}
				switch {
				case bytes.HasPrefix(line, []byte("id: ")):
					seen++
					if seen%events == 0 {
						rounds <- struct{}{}
					}
				case !signalled && bytes.Equal(line, []byte(": live\n")):
					signalled = true
					live <- nil
				}
			}
		})
	}
	for range n {
		select {
		case err := <-live:
			if err != nil {
				b.Fatal(err)
			}
		case <-ctx.Done():
			b.Fatal("clients did not connect in time")
		}
	}

	var elapsed time.Duration
	b.ResetTimer()
	for round := range b.N {
		start := publish(round)
		for range n {
			select {
			case <-rounds:
			case <-ctx.Done():
				b.Fatal("events were not delivered in time")
			}
		}
		elapsed += time.Since(start)
	}
	b.StopTimer()
	return float64(b.N*n*events) / elapsed.Seconds()
}

// bareBroadcaster is the simplest net/http SSE fan-out: a channel per client, frames
// sent to every channel, written by the client's handler and flushed after each one,
// or with coalesce after each run of frames already queued.
type bareBroadcaster struct {
	coalesce bool
	mu       sync.Mutex
	subs     map[chan []byte]struct{}
	done     chan struct{}
}

func newBareBroadcaster(coalesce bool) *bareBroadcaster {
	return &bareBroadcaster{coalesce: coalesce, subs: map[chan []byte]struct{}{}, done: make(chan struct{})}
}

func (bb *bareBroadcaster) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ch := make(chan []byte, 1024)
	bb.mu.Lock()
	bb.subs[ch] = struct{}{}
	bb.mu.Unlock()
	defer func() {
		bb.mu.Lock()
		delete(bb.subs, ch)
		bb.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	flusher := w.(http.Flusher)
	_, _ = w.Write([]byte(": live\n\n"))
	flusher.Flush()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-bb.done:
			return
		case msg := <-ch:
			if _, err := w.Write(msg); err != nil {
				return
			}
			for queued := bb.coalesce; queued; {
				select {
				case msg = <-ch:
					if _, err := w.Write(msg); err != nil {
						return
					}
				default:
					queued = false
				}
			}
			flusher.Flush()
		}
	}
}

func (bb *bareBroadcaster) publish(msg []byte) {
	bb.mu.Lock()
	defer bb.mu.Unlock()
	for ch := range bb.subs {
		select {
		case ch <- msg:
		default: // a client this far behind misses the frame
		}
	}
}

func (bb *bareBroadcaster) close() { close(bb.done) }

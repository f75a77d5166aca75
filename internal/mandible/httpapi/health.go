package httpapi

import (
	"context"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/mantis-deploy/mantis/internal/contract/api"
)

// readyTimeout bounds one round of /readyz checks, and so every /readyz answer.
const readyTimeout = 3 * time.Second

// readyFresh is how long a finished round answers /readyz before the next call
// starts another: a flood of probes runs the checks at most once a readyFresh.
const readyFresh = time.Second

// healthHandler answers /healthz: the process serves HTTP.
func healthHandler(w http.ResponseWriter, _ *http.Request) {
	api.WriteJSON(w, http.StatusOK, api.Health{Status: api.StatusOK})
}

// readiness runs the /readyz checks for every caller at once: the callers that arrive
// while a round runs wait for that round, and those within readyFresh of its end get
// its answer. A check that has not answered by a round's end is not run again until it
// returns, so a dependency that hangs (a broker dial holding the publisher's lock)
// holds one call to it, not one per probe.
type readiness struct {
	checks map[string]Check
	names  []string

	mu     sync.Mutex
	last   api.Readiness
	lastAt time.Time
	round  chan struct{}        // closed when the round in flight ends; nil when none runs
	busy   map[string]time.Time // checks still running, since when
}

func newReadiness(checks map[string]Check) *readiness {
	names := make([]string, 0, len(checks))
	for name := range checks {
		names = append(names, name)
	}
	sort.Strings(names)
	return &readiness{checks: checks, names: names, busy: map[string]time.Time{}}
}

// handler answers 200 when every check passed in the latest round, 503 naming the
// checks that failed otherwise, within readyTimeout.
func (rd *readiness) handler(w http.ResponseWriter, r *http.Request) {
	state, ok := rd.state(r.Context())
	if !ok {
		return // the caller left
	}
	code := http.StatusOK
	if !state.Ready {
		code = http.StatusServiceUnavailable
	}
	api.WriteJSON(w, code, state)
}

// state returns the latest round's answer, starting a round and waiting for it when
// that answer is older than readyFresh.
func (rd *readiness) state(ctx context.Context) (api.Readiness, bool) {
	rd.mu.Lock()
	if rd.round == nil && !rd.lastAt.IsZero() && time.Since(rd.lastAt) < readyFresh {
		defer rd.mu.Unlock()
		return rd.last, true
	}
	if rd.round == nil {
		rd.round = make(chan struct{})
		go rd.run(rd.round)
	}
	done := rd.round
	rd.mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
		return api.Readiness{}, false
	}
	rd.mu.Lock()
	defer rd.mu.Unlock()
	return rd.last, true
}

// checkResult is one check's answer in a round.
type checkResult struct {
	name, status string
}

// run runs one round: every check not still running from an earlier round,
// concurrently, each bounded by readyTimeout, and ends by readyTimeout whether they
// have all answered or not.
func (rd *readiness) run(done chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	results := make(map[string]string, len(rd.names))
	answers := make(chan checkResult, len(rd.names))
	started := 0
	rd.mu.Lock()
	for _, name := range rd.names {
		if since, running := rd.busy[name]; running {
			results[name] = "no answer yet to the check started " + time.Since(since).Round(time.Second).String() + " ago"
			continue
		}
		rd.busy[name] = time.Now()
		started++
		go func() {
			status := api.StatusOK
			if err := rd.checks[name](ctx); err != nil {
				status = err.Error()
			}
			rd.mu.Lock()
			delete(rd.busy, name)
			rd.mu.Unlock()
			answers <- checkResult{name: name, status: status}
		}()
	}
	rd.mu.Unlock()
collect:
	for range started {
		select {
		case a := <-answers:
			results[a.name] = a.status
		case <-ctx.Done():
			break collect
		}
	}
	ready := true
	for _, name := range rd.names {
		if _, ok := results[name]; !ok {
			results[name] = "no answer within " + readyTimeout.String()
		}
		ready = ready && results[name] == api.StatusOK
	}
	rd.mu.Lock()
	defer rd.mu.Unlock()
	rd.last, rd.lastAt, rd.round = api.Readiness{Ready: ready, Checks: results}, time.Now(), nil
	close(done)
}

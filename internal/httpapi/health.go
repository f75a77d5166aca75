package httpapi

import (
	"context"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/mantis-deploy/mantis/internal/api"
)

// readyTimeout bounds the checks of one /readyz call.
const readyTimeout = 3 * time.Second

// healthHandler answers /healthz: the process serves HTTP.
func healthHandler(w http.ResponseWriter, _ *http.Request) {
	api.WriteJSON(w, http.StatusOK, api.Health{Status: api.StatusOK})
}

// readyHandler runs every check concurrently with a bound and answers 503 naming the
// checks that failed.
func readyHandler(checks map[string]Check) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		defer cancel()
		var (
			mu      sync.Mutex
			wg      sync.WaitGroup
			results = map[string]string{}
			failed  bool
		)
		names := make([]string, 0, len(checks))
		for name := range checks {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			wg.Add(1)
			go func() {
				defer wg.Done()
				status := api.StatusOK
				if err := checks[name](ctx); err != nil {
					status = err.Error()
				}
				mu.Lock()
				defer mu.Unlock()
				results[name] = status
				if status != api.StatusOK {
					failed = true
				}
			}()
		}
		wg.Wait()
		code := http.StatusOK
		if failed {
			code = http.StatusServiceUnavailable
		}
		api.WriteJSON(w, code, api.Readiness{Ready: !failed, Checks: results})
	}
}

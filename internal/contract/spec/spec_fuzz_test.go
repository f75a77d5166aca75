package spec_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/contract/spec"
)

// specSeeds are valid and broken specs in YAML and JSON; the committed corpus under
// testdata/fuzz/FuzzParse holds more.
var specSeeds = []string{
	"name: web\ntargets: [web-1]\nsteps:\n  - name: s\n    command: echo hi\n",
	`{"name":"x","targets":["a"],"steps":[{"name":"s","command":"true","timeout":"90s","env":{"A":"b"},"working_dir":"/srv"}]}`,
	`{"name":"x","target_selector":{"role":"web"},"steps":[{"name":"s","command":"true"}],"max_parallel":2,"priority":"high"}`,
	"name: \"bad name\"\npriority: urgent\ntargets: [a, a]\nsteps: [{name: a, command: \"\", timeout: soon}]\n",
	`{"name":1}`,
	`{"steps":[{"name":"s","command":"x","timeout":1}]}`,
	`{"unknown":true}`,
	`[1,2]`,
	`"just a string"`,
	`null`,
	"",
	"name: [",
	"{\"name\":\"x\",\"targets\":[\"a\"],\"steps\":[{\"name\":\"s\",\"command\":\"c\"}]}\n{}",
	"name: x\ntargets: [a]\nsteps: [{name: s, command: c, env: {\"\": v}}]\nmax_parallel: -3\n",
	"a: &a [*a]",
	"name: x\ntargets: [a]\nsteps:\n  - {name: ok, kind: approval, approvers: [alice], timeout: 2h, on_timeout: approve}\n  - {name: s, command: c, on_failure: ask}\n",
	`{"name":"x","targets":["a"],"steps":[{"name":"s","command":"c","on_failure":"ask","continue_on_error":true}]}`,
	`{"name":"x","targets":["a"],"rollout":{"batches":[1,"10%","100%"],"pause_between":"approval","max_failures":2,"canary":{"verify":"true"}},"steps":[{"name":"s","command":"c"}],"on_failure":[{"name":"r","command":"c"}]}`,
	`{"name":"x","targets":["a"],"rollout":{"batches":["0%",-1,"x"]},"steps":[{"name":"s","command":"c"}]}`,
}

// wholeSpecProblems are the problems that concern the spec as a whole, and so name no
// field.
var wholeSpecProblems = []string{"the spec is empty", "not valid YAML or JSON", "the spec must be a mapping", "an empty key"}

// FuzzParse feeds any bytes to the spec parser: it never panics, a refusal lists
// problems that each name their field (or say the spec as a whole is unreadable), and
// an accepted spec is valid and survives a JSON round trip unchanged.
func FuzzParse(f *testing.F) {
	for _, s := range specSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := parseWithin(t, b, parseBound)
		if err != nil {
			var errs spec.Errors
			require.True(t, errors.As(err, &errs), "refusal is not spec.Errors: %v", err)
			require.NotEmpty(t, errs)
			for _, e := range errs {
				require.NotEmpty(t, e.Problem, "a problem without text: %+v", e)
				if e.Field == "" {
					require.True(t, hasAnyPrefix(e.Problem, wholeSpecProblems),
						"a problem names no field: %q", e.Problem)
				}
				require.Contains(t, err.Error(), e.Field)
			}
			return
		}
		require.NoError(t, d.Validate())
		js, err := json.Marshal(d)
		require.NoError(t, err)
		again, err := spec.Parse(js)
		require.NoError(t, err, "an accepted spec does not parse again from its JSON %s", js)
		require.Equal(t, d, again)
		withDefaults := d.WithDefaults()
		require.NoError(t, withDefaults.Validate())
		for _, s := range withDefaults.Steps {
			require.Positive(t, s.TimeoutDuration())
		}
	})
}

// parseBound is how long one parse may take: a small input that takes longer is a
// denial of service on the API.
const parseBound = 2 * time.Second

// parseWithin parses b, failing the test, with the input, when that takes longer than
// bound.
func parseWithin(t *testing.T, b []byte, bound time.Duration) (spec.Deployment, error) {
	t.Helper()
	type parsed struct {
		d   spec.Deployment
		err error
	}
	done := make(chan parsed, 1)
	go func() {
		d, err := spec.Parse(b)
		done <- parsed{d, err}
	}()
	select {
	case p := <-done:
		return p.d, p.err
	case <-time.After(bound):
		t.Fatalf("parsing %d bytes took over %s: %q", len(b), bound, b)
		return spec.Deployment{}, nil
	}
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

package sse

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/contract/api"
)

// streamFields are the names a refused stream request may give.
var streamFields = []string{"id", "query", "deployment", "type", "target", "last_event_id", "Last-Event-ID"}

// FuzzStreamQuery feeds any query string and Last-Event-ID header to both event
// streams: parsing never panics; every refusal names its parameter and is answered
// 400 by the handler with those same fields; an accepted request holds only valid
// types, targets and a non-negative resume position, set exactly when one was given.
func FuzzStreamQuery(f *testing.F) {
	for _, s := range []struct {
		query, lastEventID, pathID string
		oneDeployment              bool
	}{
		{"", "", "", false},
		{"type=deployment.*,step.finished&target=web-1,web-2", "", "", false},
		{"deployment=0190c5b4-2f58-7cc1-9c5e-6b8f0d2c1a11&last_event_id=42", "", "", false},
		{"last_event_id=-1", "", "", false},
		{"last_event_id=1&last_event_id=2", "", "", false},
		{"", "17", "0190c5b4-2f58-7cc1-9c5e-6b8f0d2c1a11", true},
		{"", "nope", "not-a-uuid", true},
		{"deployment=0190c5b4-2f58-7cc1-9c5e-6b8f0d2c1a11", "", "0190c5b4-2f58-7cc1-9c5e-6b8f0d2c1a11", true},
		{"type=,&target=bad name&since=1", "99999999999999999999", "", false},
		{"=x&type=%zz", "", "", false},
		{"a;b=c", "", "", false},
	} {
		f.Add(s.query, s.lastEventID, s.pathID, s.oneDeployment)
	}
	h := NewHandler(nil, HandlerOptions{})
	f.Fuzz(func(t *testing.T, rawQuery, lastEventID, pathID string, oneDeployment bool) {
		r := &http.Request{Method: http.MethodGet, URL: &url.URL{Path: "/sse/events", RawQuery: rawQuery}, Header: http.Header{}}
		if lastEventID != "" {
			r.Header.Set("Last-Event-ID", lastEventID)
		}
		f, after, problems := parseStreamQuery(r, !oneDeployment)
		if oneDeployment && pathID != "" {
			if _, err := uuid.Parse(pathID); err != nil {
				problems = append(problems, api.FieldProblem{Field: "id", Problem: "must be a deployment UUID"})
			}
		}
		q, queryErr := url.ParseQuery(rawQuery)
		if queryErr != nil {
			require.NotEmpty(t, problems, "a query that does not decode is not refused: %v", queryErr)
		}
		if len(problems) > 0 {
			for _, p := range problems {
				require.NotEmpty(t, p.Problem)
				require.True(t, slices.Contains(streamFields, p.Field) || (p.Field != "" && q.Has(p.Field)),
					"a problem names no parameter of the request: %+v", p)
			}
			if !oneDeployment {
				requireRefused(t, h, r, problems)
			} else if pathID != "" {
				r.URL.Path = "/sse/deployments/" + url.PathEscape(pathID)
				requireRefused(t, h, r, problems)
			}
			return
		}
		for _, typ := range f.types {
			require.Regexp(t, typePattern, typ)
		}
		for _, target := range f.targets {
			require.Regexp(t, targetPattern, target)
		}
		given := lastEventID != "" || r.URL.Query().Has("last_event_id")
		require.Equal(t, given, after != nil, "a resume position given and lost, or made up")
		if after != nil {
			require.GreaterOrEqual(t, *after, int64(0))
		}
	})
}

// requireRefused serves r and requires a 400 whose body lists problems.
func requireRefused(t *testing.T, h http.Handler, r *http.Request, problems []api.FieldProblem) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	require.Equal(t, http.StatusBadRequest, rec.Code, rec.Body.String())
	var body api.ErrorBody
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
	// JSON carries text: invalid UTF-8 in a field name arrives as U+FFFD.
	js, err := json.Marshal(problems)
	require.NoError(t, err)
	var want []api.FieldProblem
	require.NoError(t, json.Unmarshal(js, &want))
	require.ElementsMatch(t, want, body.Error.Fields)
}

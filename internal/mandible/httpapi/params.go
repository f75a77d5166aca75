package httpapi

import (
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"
)

// The query parameters of the list routes are read by these helpers. Each appends
// its problems, in the "<param>: <problem>" form of schema.InputError, to problems
// and returns them with the value, so that one answer lists every bad parameter.

// statusesParam reads ?status=a,b, each of which must be one of allowed.
func statusesParam(q url.Values, problems []string, allowed []string) ([]string, []string) {
	v := q.Get("status")
	if v == "" {
		return nil, problems
	}
	var out []string
	for _, st := range strings.Split(v, ",") {
		if !slices.Contains(allowed, st) {
			problems = append(problems, "status: must be "+oneOf(allowed)+", got "+strconv.Quote(st))
			continue
		}
		out = append(out, st)
	}
	return out, problems
}

// oneOf lists values as "a, b or c".
func oneOf(values []string) string {
	if len(values) < 2 {
		return strings.Join(values, "")
	}
	return strings.Join(values[:len(values)-1], ", ") + " or " + values[len(values)-1]
}

// limitParam reads ?limit=n, 1 to most; 0 when absent.
func limitParam(q url.Values, problems []string, most int) (int, []string) {
	v := q.Get("limit")
	if v == "" {
		return 0, problems
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > most {
		problems = append(problems, "limit: must be 1-"+strconv.Itoa(most)+", got "+strconv.Quote(v))
	}
	return n, problems
}

// uuidParam reads the UUID parameter key; nil when absent.
func uuidParam(q url.Values, problems []string, key string) (*uuid.UUID, []string) {
	v := q.Get(key)
	if v == "" {
		return nil, problems
	}
	id, err := uuid.Parse(v)
	if err != nil {
		return nil, append(problems, key+": must be a UUID, got "+strconv.Quote(v))
	}
	return &id, problems
}

// pageSize is the size of a page asked for with limit (0 for the default).
func pageSize(limit, def int) int {
	if limit == 0 {
		return def
	}
	return limit
}

// withBefore is q with before set to id: the query of the page after the one that
// ended with id.
func withBefore(q url.Values, id uuid.UUID) string {
	next := url.Values{}
	for k, v := range q {
		next[k] = v
	}
	next.Set("before", id.String())
	return next.Encode()
}

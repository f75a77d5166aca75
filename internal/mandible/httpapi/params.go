package httpapi

import (
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/internal/safetext"
	"github.com/mantis-deploy/mantis/schema"
)

// The query parameters of the list routes are read by these helpers. Each adds its
// problems, by parameter, to problems and returns the value, so that one answer
// lists every bad parameter.

// statusesParam reads ?status=a,b, each of which must be one of allowed.
func statusesParam(q url.Values, problems *domain.Problems, allowed []string) []string {
	v := q.Get("status")
	if v == "" {
		return nil
	}
	var out []string
	for _, st := range strings.Split(v, ",") {
		if !slices.Contains(allowed, st) {
			problems.Add("status", "must be "+oneOf(allowed)+", got "+strconv.Quote(st))
			continue
		}
		out = append(out, st)
	}
	return out
}

// oneOf lists values as "a, b or c".
func oneOf(values []string) string {
	if len(values) < 2 {
		return strings.Join(values, "")
	}
	return strings.Join(values[:len(values)-1], ", ") + " or " + values[len(values)-1]
}

// limitParam reads ?limit=n, 1 to most; 0 when absent.
func limitParam(q url.Values, problems *domain.Problems, most int) int {
	v := q.Get("limit")
	if v == "" {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > most {
		problems.Add("limit", "must be 1-"+strconv.Itoa(most)+", got "+strconv.Quote(v))
	}
	return n
}

// uuidParam reads the UUID parameter key; nil when absent.
func uuidParam(q url.Values, problems *domain.Problems, key string) *uuid.UUID {
	v := q.Get(key)
	if v == "" {
		return nil
	}
	id, err := uuid.Parse(v)
	if err != nil {
		problems.Add(key, "must be a UUID, got "+strconv.Quote(v))
		return nil
	}
	return &id
}

// Bounds on ?selector=, those of a target's labels.
const (
	maxSelectorPairs = 64
	maxSelectorBytes = 1024
)

// selectorParam reads ?selector=k=v,k2=v2: the labels a target must all hold, as a
// deployment spec's target_selector. A key is not empty; a value may be, and
// neither holds a comma. nil when absent.
func selectorParam(q url.Values, problems *domain.Problems) map[string]string {
	v := q.Get("selector")
	if v == "" {
		return nil
	}
	pairs := strings.Split(v, ",")
	if len(pairs) > maxSelectorPairs {
		problems.Add("selector", "at most "+strconv.Itoa(maxSelectorPairs)+" key=value pairs, got "+strconv.Itoa(len(pairs)))
		return nil
	}
	out := make(map[string]string, len(pairs))
	for _, pair := range pairs {
		shown := strconv.Quote(safetext.Bound(pair, 64))
		k, val, ok := strings.Cut(pair, "=")
		prev, seen := out[k]
		switch {
		case !ok || k == "":
			problems.Add("selector", "must be key=value pairs separated by commas (role=web,env=prod), got "+shown)
		case safetext.Unstorable(k+val, maxSelectorBytes) != "":
			problems.Add("selector", "pair "+shown+": "+safetext.Unstorable(k+val, maxSelectorBytes))
		case seen && prev != val:
			problems.Add("selector", "key "+strconv.Quote(safetext.Bound(k, 64))+" is given two values")
		default:
			out[k] = val
		}
	}
	return out
}

// afterParam reads ?after=name, the last target name of the previous page; ""
// when absent.
func afterParam(q url.Values, problems *domain.Problems) string {
	v := q.Get("after")
	if v != "" && !schema.IsTargetName(v) {
		problems.Add("after", "must be a target name (the last of the previous page), got "+
			strconv.Quote(safetext.Bound(v, 64)))
	}
	return v
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
	return withParam(q, "before", id.String())
}

// withParam is q with key set to value: the query of the next page.
func withParam(q url.Values, key, value string) string {
	next := url.Values{}
	for k, v := range q {
		next[k] = v
	}
	next.Set(key, value)
	return next.Encode()
}

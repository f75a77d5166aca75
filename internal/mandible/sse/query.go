package sse

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/mantis-deploy/mantis/internal/contract/api"
)

// parseStreamQuery reads the filter and resume position of a stream request, with
// every problem found.
func parseStreamQuery(r *http.Request, deploymentParam bool) (filter, *int64, []api.FieldProblem) {
	var (
		f        filter
		after    *int64
		problems []api.FieldProblem
	)
	// r.URL.Query drops what it cannot decode; a filter dropped silently would widen
	// the stream, so a query that does not decode is refused.
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		problems = append(problems, api.FieldProblem{Field: "query", Problem: "not a valid query string: " + err.Error()})
	}
	for key, values := range q {
		switch key {
		case "":
			problems = append(problems, api.FieldProblem{Field: "query", Problem: "a parameter without a name"})
		case "deployment":
			if !deploymentParam {
				problems = append(problems, api.FieldProblem{Field: key, Problem: "not allowed here: the path names the deployment"})
				continue
			}
			if len(values) != 1 {
				problems = append(problems, api.FieldProblem{Field: key, Problem: "give one deployment"})
				continue
			}
			id, err := uuid.Parse(values[0])
			if err != nil {
				problems = append(problems, api.FieldProblem{Field: key, Problem: "must be a deployment UUID"})
				continue
			}
			f.deploymentID = &id
		case "type":
			for _, t := range splitList(values) {
				if !typePattern.MatchString(t) {
					problems = append(problems, api.FieldProblem{Field: key,
						Problem: fmt.Sprintf("%q is not an event type or pattern such as step.finished or step.*", t)})
					continue
				}
				f.types = append(f.types, t)
			}
		case "target":
			for _, t := range splitList(values) {
				if !targetPattern.MatchString(t) {
					problems = append(problems, api.FieldProblem{Field: key, Problem: fmt.Sprintf("%q is not a target name", t)})
					continue
				}
				f.targets = append(f.targets, t)
			}
		case "last_event_id":
		default:
			problems = append(problems, api.FieldProblem{Field: key, Problem: "unknown parameter"})
		}
	}
	field, value := "Last-Event-ID", r.Header.Get("Last-Event-ID")
	if value == "" && q.Has("last_event_id") {
		field, value = "last_event_id", q.Get("last_event_id")
		if len(q["last_event_id"]) != 1 {
			problems = append(problems, api.FieldProblem{Field: field, Problem: "give one event id"})
		}
	}
	if value != "" || field == "last_event_id" {
		id, err := strconv.ParseInt(value, 10, 64)
		if err != nil || id < 0 {
			problems = append(problems, api.FieldProblem{Field: field, Problem: "must be an event id: a whole number of 0 or more"})
		} else {
			after = &id
		}
	}
	return f, after, problems
}

// splitList splits comma-separated values; an empty item is kept so that it is
// reported.
func splitList(values []string) []string {
	var out []string
	for _, v := range values {
		for item := range strings.SplitSeq(v, ",") {
			out = append(out, strings.TrimSpace(item))
		}
	}
	return out
}

// What a types or target parameter may hold: an event type or a subject's
// pattern (step.*), and a target name.
var (
	typePattern   = regexp.MustCompile(`^(deployment|step|target)\.([a-z_]+|\*)$`)
	targetPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
)

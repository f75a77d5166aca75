package httpapi

import (
	"net/http"
	"net/url"
	"regexp"
	"strconv"

	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/schema"
)

// Pages of GET /api/v1/deployments/{id}/output, in chunks of at most 16 KiB each.
const (
	defaultOutputPage = 100
	maxOutputPage     = 500
)

// outputTargetPattern is what ?target= may hold: a target name.
var outputTargetPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// getDeploymentOutput answers the stored live output of a deployment's commands, of
// one target (?target=) and one step (?step=, its 0-based position) when asked, from
// the chunk after ?after= (a page's last id), at most ?limit= chunks.
func (s *server) getDeploymentOutput(w http.ResponseWriter, r *http.Request) {
	d, ok := s.findDeployment(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	f, limit, problems := outputParams(q)
	if len(problems) > 0 {
		writeInputError(w, r, &domain.InputError{Problems: problems})
		return
	}
	chunks, err := schema.ReadDeploymentOutput(r.Context(), s.db, d.ID, f, pageSize(limit, defaultOutputPage))
	if err != nil {
		writeServerError(w, r, s.logger, err)
		return
	}
	page := api.OutputPage{Chunks: make([]api.OutputChunk, len(chunks))}
	for i, c := range chunks {
		page.Chunks[i] = api.OutputChunk{ID: c.ID, Target: c.Target, Step: c.Step, RequestID: c.RequestID,
			CommandID: c.CommandID, Seq: c.Seq, Data: c.Data, Truncated: c.Truncated, CreatedAt: c.CreatedAt}
	}
	if len(chunks) == pageSize(limit, defaultOutputPage) {
		next := url.Values{}
		for k, v := range q {
			next[k] = v
		}
		next.Set("after", strconv.FormatInt(chunks[len(chunks)-1].ID, 10))
		page.Next = "/api/v1/deployments/" + d.ID.String() + "/output?" + next.Encode()
	}
	api.WriteJSON(w, http.StatusOK, page)
}

// outputParams reads target, step, after and limit, with every problem found.
func outputParams(q url.Values) (schema.OutputFilter, int, domain.Problems) {
	var (
		f        schema.OutputFilter
		problems domain.Problems
	)
	for key := range q {
		switch key {
		case "target", "step", "after", "limit":
		default:
			problems.Add(key, "unknown parameter")
		}
	}
	if v := q.Get("target"); v != "" {
		if !outputTargetPattern.MatchString(v) {
			problems.Add("target", "not a target name: "+strconv.Quote(v))
		}
		f.Target = v
	}
	if v := q.Get("step"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 10000 {
			problems.Add("step", "must be a step position, 0-10000, got "+strconv.Quote(v))
		}
		f.Step = &n
	}
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			problems.Add("after", "must be a chunk id, 0 or more, got "+strconv.Quote(v))
		}
		f.After = n
	}
	limit := limitParam(q, &problems, maxOutputPage)
	return f, limit, problems
}

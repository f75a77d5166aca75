package httpapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// registerTargets registers each target of labels (name to its labels) through the API.
func (b apiBundle) registerTargets(t *testing.T, labels map[string]string) {
	t.Helper()
	for name, l := range labels {
		code, body := b.do(t, http.MethodPost, "/api/v1/targets", fmt.Sprintf(`{"name":%q,"mode":"poll","labels":%s}`, name, l), true)
		require.Equal(t, http.StatusOK, code, body)
	}
}

// targetPages reads path and every page its next links name, returning the names
// of each page.
func (b apiBundle) targetPages(t *testing.T, path string) [][]string {
	t.Helper()
	var pages [][]string
	for path != "" {
		code, body := b.do(t, http.MethodGet, path, "", true)
		require.Equal(t, http.StatusOK, code, body)
		names := []string{}
		for _, tg := range body["targets"].([]any) {
			names = append(names, tg.(map[string]any)["name"].(string))
		}
		pages = append(pages, names)
		next, _ := body["next"].(string)
		require.NotEqual(t, path, next)
		path = next
		require.Less(t, len(pages), 20, "the pages end")
	}
	return pages
}

// GET /api/v1/targets pages by name with limit and after, follows a selector of
// labels across its pages, and leaves deregistered targets out.
func TestTargetsPageAndSelect(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.registerTargets(t, map[string]string{
		"web-1": `{"role":"web","env":"prod"}`, "web-2": `{"role":"web","env":"prod"}`,
		"web-3": `{"role":"web","env":"test"}`, "web-4": `{"role":"web","env":""}`,
		"db-1": `{"role":"db","env":"prod"}`, "db-2": `{"role":"db"}`, "db-3": `{}`, "gone": `{"role":"web"}`,
	})
	code, _ := b.do(t, http.MethodDelete, "/api/v1/targets/gone", "", true)
	require.Equal(t, http.StatusNoContent, code)

	require.Equal(t, [][]string{{"db-1", "db-2", "db-3", "web-1", "web-2", "web-3", "web-4"}},
		b.targetPages(t, "/api/v1/targets"), "one page under the default size, deregistered left out")
	require.Equal(t, [][]string{{"db-1", "db-2", "db-3"}, {"web-1", "web-2", "web-3"}, {"web-4"}},
		b.targetPages(t, "/api/v1/targets?limit=3"), "the last page has no next")
	require.Equal(t, [][]string{{"web-1", "web-2"}, {"web-3", "web-4"}, {}},
		b.targetPages(t, "/api/v1/targets?selector=role%3Dweb&limit=2"), "the selector holds on every page; a full last page leads to an empty one")
	require.Equal(t, [][]string{{"db-1", "web-1", "web-2"}}, b.targetPages(t, "/api/v1/targets?selector=env=prod"))
	require.Equal(t, [][]string{{"web-1", "web-2"}}, b.targetPages(t, "/api/v1/targets?selector=env=prod,role=web"))
	require.Equal(t, [][]string{{"web-4"}}, b.targetPages(t, "/api/v1/targets?selector=env="), "an empty value matches an empty label")
	require.Equal(t, [][]string{{}}, b.targetPages(t, "/api/v1/targets?selector=role=cache"))
	require.Equal(t, [][]string{{"web-3", "web-4"}}, b.targetPages(t, "/api/v1/targets?after=web-2"))

	code, body := b.do(t, http.MethodGet, "/api/v1/targets/web-1", "", true)
	require.Equal(t, http.StatusOK, code, body)
	require.Equal(t, map[string]any{"role": "web", "env": "prod"}, body["labels"])
	for _, name := range []string{"gone", "ghost", "bad%20name"} {
		code, body = b.do(t, http.MethodGet, "/api/v1/targets/"+name, "", true)
		require.Equal(t, http.StatusNotFound, code, name)
		require.Equal(t, "not_found", body["code"], name)
	}
}

// Bad paging and selector parameters are refused with 400, each named.
func TestTargetsRefuseBadParameters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for query, want := range map[string]string{
		"selector=role":             "must be key=value pairs",
		"selector==web":             "must be key=value pairs",
		"selector=role=web,":        "must be key=value pairs",
		"selector=role=web,role=db": `key "role" is given two values`,
		"selector=role=%00":         "must not contain NUL",
		"limit=0":                   "must be 1-1000",
		"limit=1001":                "must be 1-1000",
		"limit=ten":                 "must be 1-1000",
		"after=bad%20name":          "must be a target name",
		"selector=" + manyPairs(65): "at most 64 key=value pairs",
		"selector=k%3D" + strings.Repeat("x", 1100): "at most 1024 bytes",
	} {
		code, body := b.do(t, http.MethodGet, "/api/v1/targets?"+query, "", true)
		require.Equal(t, http.StatusBadRequest, code, query)
		require.Equal(t, "invalid_argument", body["code"], query)
		f := fields(t, body)
		require.Len(t, f, 1, query)
		for _, problem := range f {
			require.Contains(t, problem, want, query)
		}
	}
	code, body := b.do(t, http.MethodGet, "/api/v1/targets?selector=role&limit=0&after=-x", "", true)
	require.Equal(t, http.StatusBadRequest, code)
	require.Len(t, fields(t, body), 3, "every bad parameter is named at once")
}

// manyPairs is a selector of n distinct pairs.
func manyPairs(n int) string {
	s := "k0=v"
	for i := 1; i < n; i++ {
		s += fmt.Sprintf(",k%d=v", i)
	}
	return s
}

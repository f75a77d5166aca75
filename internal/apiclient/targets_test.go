package apiclient_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/apiclient"
)

// ListTargets follows the next links page after page, stops once it holds Limit
// targets, and sends the selector as key=value pairs sorted by key.
func TestListTargetsFollowsPages(t *testing.T) {
	t.Parallel()
	var queries []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		queries = append(queries, r.URL.RawQuery)
		switch r.URL.Query().Get("after") {
		case "":
			_, _ = fmt.Fprintf(w, `{"targets":[{"name":"a"},{"name":"b"}],"next":"/api/v1/targets?after=b&%s"}`, r.URL.RawQuery)
		case "b":
			_, _ = w.Write([]byte(`{"targets":[{"name":"c"}]}`))
		}
	}))
	t.Cleanup(srv.Close)
	c, ctx := apiclient.New(srv.URL, "t"), context.Background()

	all, err := c.ListTargets(ctx, apiclient.TargetQuery{Selector: map[string]string{"role": "web", "env": "prod"}})
	require.NoError(t, err)
	require.Len(t, all, 3)
	require.Equal(t, []string{"limit=1000&selector=env%3Dprod%2Crole%3Dweb", "after=b&limit=1000&selector=env%3Dprod%2Crole%3Dweb"}, queries)

	queries = nil
	two, err := c.ListTargets(ctx, apiclient.TargetQuery{Limit: 2})
	require.NoError(t, err)
	require.Len(t, two, 2)
	require.Equal(t, []string{"limit=2"}, queries, "a full first page is enough")

	listed, err := apiclient.Targets.List(c, ctx)
	require.NoError(t, err)
	require.Len(t, listed, 3, "the collection lists every page")

	_, err = c.ListTargets(ctx, apiclient.TargetQuery{Selector: map[string]string{"role": "web,db"}})
	require.ErrorContains(t, err, "no comma")
}

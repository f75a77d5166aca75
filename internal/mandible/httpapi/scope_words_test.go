package httpapi_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/mantis-deploy/mantis/internal/mandible/apitoken"
	"github.com/mantis-deploy/mantis/internal/mandible/httpapi"
)

// namedGet is a GET of the API named in prose.
var namedGet = regexp.MustCompile(`GET (/api/v1/[^\s,.]+)`)

// Where scopes are described in words (apitoken.ScopeHelp, which mantisctl token
// --help prints, and the document's bearerAuth scheme), "read covers every GET"
// holds but for the GETs named as needing admin: those are all and only the GET
// routes that need admin, and no GET route needs deploy.
func TestScopeWordsNameTheAdminReads(t *testing.T) {
	t.Parallel()
	doc := loadDocument(t)
	tc, err := client.NewLazyClient(client.Options{HostPort: "127.0.0.1:1"})
	require.NoError(t, err)
	t.Cleanup(tc.Close)
	var adminGets []string
	for _, rt := range httpapi.Routes(tc) {
		method, path, _ := strings.Cut(rt.Pattern, " ")
		if method != "GET" || !strings.HasPrefix(path, "/api/v1/") {
			continue
		}
		require.NotEqual(t, string(apitoken.ScopeDeploy), rt.Scope, "%s: a GET needs read or admin", rt.Pattern)
		if rt.Scope == string(apitoken.ScopeAdmin) {
			adminGets = append(adminGets, path)
		}
	}
	slices.Sort(adminGets)
	require.NotEmpty(t, adminGets)
	for where, text := range map[string]string{
		"apitoken.ScopeHelp": apitoken.ScopeHelp,
		"bearerAuth":         doc.Components.SecuritySchemes["bearerAuth"].Value.Description,
	} {
		var named []string
		for _, m := range namedGet.FindAllStringSubmatch(text, -1) {
			named = append(named, m[1])
		}
		slices.Sort(named)
		require.Equal(t, adminGets, slices.Compact(named), "the GETs %s says need admin", where)
	}
}

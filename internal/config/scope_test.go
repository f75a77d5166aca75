package config_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/config"
)

// thorax.scopes reads name patterns and label selectors per certificate; a listed
// certificate is scoped, an unlisted one only under scoped_only (with the empty
// scope), and a selector that does not parse is a problem naming the key.
func TestThoraxScopes(t *testing.T) {
	t.Parallel()
	h := config.ThoraxHealth{Scopes: map[string]string{"thorax-eu": "web-eu-* db-?  region=eu"}}
	s, scoped := h.ScopeOf("thorax-eu")
	require.True(t, scoped)
	require.Equal(t, []string{"web-eu-*", "db-?"}, s.Names)
	require.Equal(t, []map[string]string{{"region": "eu"}}, s.Labels)
	_, scoped = h.ScopeOf("thorax-us")
	require.False(t, scoped, "a certificate not listed serves every target")
	h.ScopedOnly = true
	s, scoped = h.ScopeOf("thorax-us")
	require.True(t, scoped)
	require.Empty(t, s.Names)
	require.Empty(t, s.Labels)

	cfg := config.DefaultMandible()
	cfg.Thorax.Scopes = map[string]string{"thorax-eu": "web/* =eu", "bad name!": "web-*"}
	err := cfg.Validate()
	require.ErrorContains(t, err, `thorax.scopes.thorax-eu: "web/*" is not a target name pattern`)
	require.ErrorContains(t, err, `"=eu" is not label=value`)
	require.ErrorContains(t, err, "thorax.scopes.bad name!: must name a certificate")
}

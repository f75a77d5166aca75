package identity_test

import (
	"crypto/x509"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/identity"
)

func TestParse(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]identity.ID{
		"spiffe://mantis/thorax/thorax-1": {Role: identity.RoleThorax, Name: "thorax-1"},
		"spiffe://mantis/agent/web-1":     {Role: identity.RoleAgent, Name: "web-1"},
	} {
		u, err := url.Parse(raw)
		require.NoError(t, err)
		id, err := identity.Parse(u)
		require.NoError(t, err, raw)
		require.Equal(t, want, id)
		require.Equal(t, raw, id.URI().String())
	}
	for raw, problem := range map[string]string{
		"spiffe://other/thorax/t1":       "not a spiffe://mantis",
		"https://mantis/thorax/t1":       "not a spiffe://mantis",
		"spiffe://mantis/thorax":         "no name after the role",
		"spiffe://mantis/root/t1":        `role "root"`,
		"spiffe://mantis/agent/a/b":      `name "a/b"`,
		"spiffe://mantis/agent/":         `name ""`,
		"spiffe://mantis/agent/web?x=1":  "not a spiffe://mantis",
		"spiffe://u@mantis/agent/web-1":  "not a spiffe://mantis",
		"spiffe://mantis/agent/.hidden":  `name ".hidden"`,
		"spiffe://mantis/agent/web%201":  `name "web 1"`,
		"spiffe://mantis/agent/web-1#id": "not a spiffe://mantis",
	} {
		u, err := url.Parse(raw)
		require.NoError(t, err)
		_, err = identity.Parse(u)
		require.ErrorContains(t, err, problem, raw)
	}
}

func TestFromCertificate(t *testing.T) {
	t.Parallel()
	uri := func(s string) *url.URL {
		u, err := url.Parse(s)
		require.NoError(t, err)
		return u
	}
	id, err := identity.FromCertificate(&x509.Certificate{URIs: []*url.URL{
		uri("https://example.com/other"), uri("spiffe://mantis/agent/web-1"),
	}})
	require.NoError(t, err)
	require.Equal(t, identity.ID{Role: identity.RoleAgent, Name: "web-1"}, id)

	_, err = identity.FromCertificate(&x509.Certificate{})
	require.ErrorIs(t, err, identity.ErrNoIdentity)
	_, err = identity.FromCertificate(&x509.Certificate{URIs: []*url.URL{
		uri("spiffe://mantis/agent/web-1"), uri("spiffe://mantis/thorax/t1"),
	}})
	require.ErrorContains(t, err, "2 mantis identities")
}

package main

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/devcerts"
	"github.com/mantis-deploy/mantis/internal/identity"
)

func TestDevCertsIssuesNamedPairs(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "certs")
	out, err := execute(t, "dev", "certs", "--dir", dir, "--issue", "agent/web-1", "--issue", "thorax/thorax-1")
	require.NoError(t, err)
	b := devcerts.Bundle{Dir: dir}
	for _, id := range []identity.ID{{Role: identity.RoleAgent, Name: "web-1"}, {Role: identity.RoleThorax, Name: "thorax-1"}} {
		cert, _ := b.Issued(id.Role, id.Name)
		require.Contains(t, out, cert)
		c, err := identity.ReadCertificate(cert)
		require.NoError(t, err)
		require.Equal(t, id, c.ID)
	}

	_, err = execute(t, "dev", "certs", "--dir", dir, "--issue", "root/web-1")
	require.ErrorContains(t, err, `--issue "root/web-1": issuing a certificate pair: role "root"`)
	_, err = execute(t, "dev", "certs", "--dir", dir, "--issue", "web-1")
	require.ErrorContains(t, err, "want role/name")
}

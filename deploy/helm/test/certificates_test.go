package helmtest

import (
	"net"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/identity"
)

// componentRoles is the identity role each component's certificate must carry.
var componentRoles = map[string]identity.Role{
	"mandible": identity.RoleMandible,
	"thorax":   identity.RoleThorax,
	"agent":    identity.RoleAgent,
}

// checkCertificates checks every cert-manager Certificate: one identity of its
// component's role (an agent's named after its target), written into the Secret
// that component's pods mount, and DNS names covering the address each client
// dials (Thorax dials Mandible, agents dial Thorax).
func checkCertificates(t *testing.T, m *manifests) {
	t.Helper()
	for name, c := range m.Certificates {
		require.Len(t, c.Spec.URIs, 1, "certificate %s: one identity", name)
		u, err := url.Parse(c.Spec.URIs[0])
		require.NoError(t, err)
		id, err := identity.Parse(u)
		require.NoError(t, err, "certificate %s", name)
		component := c.Metadata.Labels[componentLabel]
		require.Equal(t, componentRoles[component], id.Role, "certificate %s: role", name)
		if component == "agent" {
			require.Equal(t, "mantis-agent-"+id.Name, name, "certificate %s: an agent's identity is its target", name)
		}
		var mounted bool
		for _, d := range m.Deployments {
			if d.Spec.Template.Labels[componentLabel] == component && volume(d.Spec.Template.Spec, "tls").Secret.SecretName == c.Spec.SecretName {
				mounted = true
			}
		}
		require.True(t, mounted, "certificate %s: no %s pod mounts Secret %s", name, component, c.Spec.SecretName)
	}
	if len(m.Certificates) == 0 {
		return
	}
	thorax := m.Deployments["mantis-thorax"].Spec.Template.Spec
	l, _ := loadConfig(t, m, thorax, thorax.Containers[0])
	require.Contains(t, m.Certificates["mantis-mandible"].Spec.DNSNames, host(t, l.cfg.(config.Thorax).Mandible.Address),
		"Mandible's certificate names the host Thorax dials")
	for name, d := range m.Deployments {
		if d.Spec.Template.Labels[componentLabel] != "agent" {
			continue
		}
		pod := d.Spec.Template.Spec
		l, _ := loadConfig(t, m, pod, pod.Containers[0])
		require.Contains(t, m.Certificates["mantis-thorax"].Spec.DNSNames, host(t, l.cfg.(config.Agent).Thorax.Address),
			"%s: Thorax's certificate names the host the agent dials", name)
	}
}

func host(t *testing.T, addr string) string {
	t.Helper()
	h, _, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	return h
}

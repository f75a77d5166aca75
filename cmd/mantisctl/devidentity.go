package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/mantis-deploy/mantis/internal/devcerts"
	"github.com/mantis-deploy/mantis/internal/identity"
	"github.com/mantis-deploy/mantis/internal/testrig/devstack"
)

// devIdentities are the certificates the local execution tier presents: the
// Thorax its own name, each agent its target's, as Mandible and Thorax require.
var devIdentities = []identity.ID{
	{Role: identity.RoleThorax, Name: devThoraxName},
	{Role: identity.RoleAgent, Name: devPollTarget},
	{Role: identity.RoleAgent, Name: devListenTarget},
}

// issueDevIdentities makes sure the stack's CA has issued each pair of
// devIdentities; the configurations name them through Certs.Issued.
func issueDevIdentities(stack *devstack.Stack) error {
	for _, id := range devIdentities {
		if _, _, err := stack.Certs.Issue(id.Role, id.Name, []string{"localhost", "127.0.0.1"}); err != nil {
			return fmt.Errorf("issuing the certificate of %s: %w", id, err)
		}
	}
	return nil
}

// issueNamed issues a pair for each role/name of specs ("agent/web-1") and
// prints where each is.
func issueNamed(out io.Writer, b devcerts.Bundle, specs, hosts []string) error {
	for _, spec := range specs {
		role, name, ok := strings.Cut(spec, "/")
		if !ok {
			return fmt.Errorf("--issue %q: want role/name, as agent/web-1", spec)
		}
		cert, key, err := b.Issue(identity.Role(role), name, hosts)
		if err != nil {
			return fmt.Errorf("--issue %q: %w", spec, err)
		}
		fmt.Fprintf(out, "%-12s %s %s\n", spec, cert, key)
	}
	return nil
}

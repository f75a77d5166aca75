package main

import (
	"fmt"

	"github.com/mantis-deploy/mantis/internal/devstack"
	"github.com/mantis-deploy/mantis/internal/identity"
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

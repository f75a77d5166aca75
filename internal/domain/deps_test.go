package domain_test

import (
	"testing"

	"github.com/mantis-deploy/mantis/internal/testrig/deptest"
)

// TestDeps holds domain to value types that workflows, activities, the store and the
// API can all import: the standard library and uuid, nothing that links a driver or a
// network client.
func TestDeps(t *testing.T) {
	t.Parallel()
	deptest.DepChecker{
		AllowDeps: []string{"std", "github.com/google/uuid"},
		AllowWhy:  "domain is imported by workflows, which must stay deterministic and light",
	}.Check(t)
}

package schema_test

import (
	"testing"

	"github.com/mantis-deploy/mantis/internal/testrig/deptest"
)

// TestDeps holds the store below the API: schema returns its own types, and the HTTP
// and gRPC layers, which read it, turn them into their answers.
func TestDeps(t *testing.T) {
	t.Parallel()
	const why = "the API layers import the store, not the other way round"
	deptest.DepChecker{
		BadDeps: map[string]string{
			"github.com/mantis-deploy/mantis/internal/contract/api":     "the HTTP API's types are the API's; the store answers with its own",
			"github.com/mantis-deploy/mantis/internal/mandible/httpapi": why,
			"github.com/mantis-deploy/mantis/internal/mandible/grpcapi": why,
			"github.com/mantis-deploy/mantis/internal/mandible/sse":     why,
			"google.golang.org/grpc/...":                                "the gRPC layer is the API's; the store serves no calls",
			"net/http":                                                  "the store serves no HTTP",
		},
	}.Check(t)
}

package workflows_test

import (
	"testing"

	"github.com/mantis-deploy/mantis/internal/testrig/deptest"
)

// TestDeps holds workflows to deterministic code over value types: no database
// driver, no broker client and no network of its own. The Temporal SDK links net/http,
// which is allowed; importing net or net/http here is not.
func TestDeps(t *testing.T) {
	t.Parallel()
	deptest.DepChecker{
		BadDeps: map[string]string{
			"github.com/jackc/pgx/...":           "workflows reach PostgreSQL only through activities",
			"github.com/rabbitmq/amqp091-go/...": "workflows reach RabbitMQ only through activities",
		},
		BadImports: map[string]string{
			"github.com/mantis-deploy/mantis/schema":     "workflows use internal/domain's value types, not the store's",
			"github.com/mantis-deploy/mantis/activities": "activities link the store and the broker; workflows call them by name",
			"net":      "workflow code does no I/O",
			"net/http": "workflow code does no I/O",
		},
	}.Check(t)
}

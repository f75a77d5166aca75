package main

import (
	"testing"

	"github.com/mantis-deploy/mantis/internal/testrig/deptest"
)

// TestDeps holds the agent, which runs on every target, to what it talks to: Thorax
// over gRPC. It reaches no database, no Temporal and no broker, so it links none of
// their clients.
func TestDeps(t *testing.T) {
	t.Parallel()
	deptest.DepChecker{
		Packages: []string{".", "github.com/mantis-deploy/mantis/internal/agent"},
		BadDeps: map[string]string{
			"github.com/jackc/pgx/...":           "the agent never reaches PostgreSQL",
			"go.temporal.io/...":                 "the agent never reaches Temporal",
			"github.com/rabbitmq/amqp091-go/...": "the agent never reaches RabbitMQ",
		},
	}.Check(t)
}

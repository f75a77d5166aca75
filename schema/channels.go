package schema

import (
	"context"
	_ "embed"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Channel is a PostgreSQL notification channel: a trigger of the migrations NOTIFYs it
// (pg_notify) and a LISTEN connection waits on it. The constants below are the one
// place Go names a channel; TestChannelsMatchTriggers checks them against the
// migrations.
type Channel string

const (
	// DispatchRequestsChannel is notified, with an empty payload, once per statement that
	// inserts dispatch requests (migration 002): it wakes every replica's dispatcher.
	DispatchRequestsChannel Channel = "mantis_dispatch_requests"
	// DeploymentResultsChannel is notified, with the deployment's id as payload, when a
	// result of one of its commands is stored (migration 004).
	DeploymentResultsChannel Channel = "mantis_deployment_results"
)

// Channels lists every notification channel.
var Channels = []Channel{DispatchRequestsChannel, DeploymentResultsChannel}

// The LISTEN statements, kept as SQL files: sqlc cannot express LISTEN, whose channel
// is an identifier.
var (
	//go:embed embedded/listen.sql
	listenSQL string
	//go:embed embedded/unlisten_all.sql
	unlistenAllSQL string
)

// Listen makes conn, which must stay out of any pool's rotation while it listens,
// wait for notifications of ch.
func Listen(ctx context.Context, conn DB, ch Channel) error {
	stmt := strings.ReplaceAll(listenSQL, "{channel}", pgx.Identifier{string(ch)}.Sanitize())
	if _, err := conn.Exec(ctx, stmt); err != nil {
		return fmt.Errorf("listening on %s: %w", ch, err)
	}
	return nil
}

// UnlistenAll stops every LISTEN of conn.
func UnlistenAll(ctx context.Context, conn DB) error {
	if _, err := conn.Exec(ctx, unlistenAllSQL); err != nil {
		return fmt.Errorf("unlistening: %w", err)
	}
	return nil
}

package schema

import (
	"context"
	"fmt"
	"time"

	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/schema/internal/dbsqlc"
)

// MaxListedInstances bounds ListThoraxInstances: a fleet keeps the rows of instances
// that died, and a listing shows the newest.
const MaxListedInstances = 1000

// ListThoraxInstances lists the newest Thorax instances, each live when its status is
// live and its last heartbeat is within heartbeatTimeout.
func ListThoraxInstances(ctx context.Context, db DB, heartbeatTimeout time.Duration) ([]api.ThoraxInstance, error) {
	rows, err := queries.ListThoraxInstances(ctx, db, dbsqlc.ListThoraxInstancesParams{
		HeartbeatTimeoutSeconds: heartbeatTimeout.Seconds(), MaxRows: MaxListedInstances})
	if err != nil {
		return nil, fmt.Errorf("listing thorax instances: %w", err)
	}
	out := make([]api.ThoraxInstance, len(rows))
	for i, r := range rows {
		out[i] = api.ThoraxInstance{ID: r.ID, Name: r.Name, CertName: r.CertName, Scoped: r.Scoped, Status: r.Status, Version: r.Version, Live: r.Live,
			RegisteredAt: r.RegisteredAt, LastHeartbeatAt: r.LastHeartbeatAt, DiedAt: r.DiedAt, Targets: int(r.Targets)}
	}
	return out, nil
}

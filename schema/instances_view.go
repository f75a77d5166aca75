package schema

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/mantis-deploy/mantis/schema/internal/dbsqlc"
)

// MaxListedInstances bounds ListThoraxInstances: a fleet keeps the rows of instances
// that died, and a listing shows the newest.
const MaxListedInstances = 1000

// ThoraxInstanceView is a Thorax instance as operators inspect it.
type ThoraxInstanceView struct {
	ID uuid.UUID
	// Name is what the instance registered under; CertName is the name its
	// certificate proves, empty without identities.
	Name     string
	CertName string
	// Scoped is whether thorax.scopes restricts the targets it may serve.
	Scoped  bool
	Status  string
	Version string
	// Live is whether it counts as live now: status live and a heartbeat within the
	// heartbeat timeout.
	Live            bool
	RegisteredAt    time.Time
	LastHeartbeatAt time.Time
	DiedAt          *time.Time
	// Targets counts the registered targets assigned to it.
	Targets int
}

// ListThoraxInstances lists the newest Thorax instances, each live when its status is
// live and its last heartbeat is within heartbeatTimeout.
func ListThoraxInstances(ctx context.Context, db DB, heartbeatTimeout time.Duration) ([]ThoraxInstanceView, error) {
	rows, err := queries.ListThoraxInstances(ctx, db, dbsqlc.ListThoraxInstancesParams{
		HeartbeatTimeoutSeconds: heartbeatTimeout.Seconds(), MaxRows: MaxListedInstances})
	if err != nil {
		return nil, fmt.Errorf("listing thorax instances: %w", err)
	}
	out := make([]ThoraxInstanceView, len(rows))
	for i, r := range rows {
		out[i] = ThoraxInstanceView{ID: r.ID, Name: r.Name, CertName: r.CertName, Scoped: r.Scoped, Status: r.Status, Version: r.Version, Live: r.Live,
			RegisteredAt: r.RegisteredAt, LastHeartbeatAt: r.LastHeartbeatAt, DiedAt: r.DiedAt, Targets: int(r.Targets)}
	}
	return out, nil
}

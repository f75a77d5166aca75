package api

import (
	"time"

	"github.com/google/uuid"
)

// ThoraxInstanceList is the answer to GET /api/v1/thorax-instances: the newest
// instances first.
type ThoraxInstanceList struct {
	Instances []ThoraxInstance `json:"instances"`
}

// ThoraxInstance is a Thorax instance as operators inspect it.
type ThoraxInstance struct {
	ID uuid.UUID `json:"id"`
	// Name is what the instance registered under; CertName is the name its
	// certificate proves (spiffe://mantis/thorax/<cert_name>), empty without
	// identities.
	Name     string `json:"name"`
	CertName string `json:"cert_name,omitempty"`
	// Scoped is whether thorax.scopes restricts the targets it may serve.
	Scoped  bool   `json:"scoped"`
	Status  string `json:"status"` // live, draining or dead, as the instance last reported or was marked
	Version string `json:"version"`
	// Live is whether it counts as live now: status live and a heartbeat within
	// Mandible's heartbeat timeout.
	Live            bool       `json:"live"`
	RegisteredAt    time.Time  `json:"registered_at"`
	LastHeartbeatAt time.Time  `json:"last_heartbeat_at"`
	DiedAt          *time.Time `json:"died_at,omitempty"`
	// Targets counts the registered targets assigned to it.
	Targets int `json:"targets"`
}

package api

import (
	"time"

	"github.com/google/uuid"
)

// NewTarget is the body of POST /api/v1/targets: a target to register or update.
type NewTarget struct {
	Name    string            `json:"name"`
	Mode    string            `json:"mode"`
	Address string            `json:"address,omitempty"`
	Labels  map[string]string `json:"labels,omitempty"`
}

// TargetList is the answer to GET /api/v1/targets: a page of targets by name,
// with the URL of the next page when the page is full.
type TargetList struct {
	Targets []Target `json:"targets"`
	Next    string   `json:"next,omitempty"`
}

// Target is a registered target; POST /api/v1/targets answers with one.
type Target struct {
	ID                 uuid.UUID         `json:"id"`
	Name               string            `json:"name"`
	Mode               string            `json:"mode"`
	Address            *string           `json:"address,omitempty"`
	Labels             map[string]string `json:"labels"`
	AssignedInstanceID *uuid.UUID        `json:"assigned_instance_id,omitempty"`
	CreatedAt          time.Time         `json:"created_at"`
	UpdatedAt          time.Time         `json:"updated_at"`
}

package api

import (
	"time"

	"github.com/mantis-deploy/mantis/internal/domain"
)

// The scopes of a concurrency limit.
const (
	// LimitScopeTarget caps the commands running at once on one target: the target
	// named by Value, or, with no Value, every target (the default).
	LimitScopeTarget = domain.LimitScopeTarget
	// LimitScopeLabel caps the commands running at once on all the targets whose
	// label Label has the value Value.
	LimitScopeLabel = domain.LimitScopeLabel
)

// DefaultTargetLimit is the name of the per-target default limit (scope target, no
// value), which caps every target at one running command unless changed. It may be
// changed but not deleted.
const DefaultTargetLimit = domain.DefaultTargetLimit

// Limit is a concurrency limit, the body of POST /api/v1/limits and an entry of
// GET /api/v1/limits. Its name is what a held dispatch request's held_by shows.
type Limit struct {
	Name       string `json:"name"`
	Scope      string `json:"scope"`
	Label      string `json:"label,omitempty"`
	Value      string `json:"value,omitempty"`
	MaxRunning int    `json:"max_running"`
	// CreatedBy, CreatedAt and UpdatedAt are Mandible's record of the last write;
	// a body that sets them has them ignored.
	CreatedBy string     `json:"created_by,omitempty"`
	CreatedAt *time.Time `json:"created_at,omitempty"`
	UpdatedAt *time.Time `json:"updated_at,omitempty"`
}

// LimitList is the answer to GET /api/v1/limits, by name.
type LimitList struct {
	Limits []Limit `json:"limits"`
}

package api

import "time"

// NewFreeze is the body of POST /api/v1/freezes: a freeze window that refuses
// deployments on the targets its selector matches. It is active from StartsAt
// (open when unset) until EndsAt (open when unset) and, when Weekly is set, only
// inside that weekly window.
type NewFreeze struct {
	Name string `json:"name"`
	// Selector matches targets whose labels hold every key=value; empty matches all.
	Selector map[string]string `json:"selector,omitempty"`
	Reason   string            `json:"reason"`
	StartsAt *time.Time        `json:"starts_at,omitempty"`
	EndsAt   *time.Time        `json:"ends_at,omitempty"`
	Weekly   *WeeklyWindow     `json:"weekly,omitempty"`
}

// WeeklyWindow is a window that opens on each of Days at From (local time of
// Timezone, UTC when empty) and closes at the next To: a To at or before From
// closes on the next day ("18:00" to "08:00"), and To equal to From lasts 24 hours.
type WeeklyWindow struct {
	// Days are mon, tue, wed, thu, fri, sat, sun.
	Days []string `json:"days"`
	// From and To are "HH:MM", 24-hour clock.
	From     string `json:"from"`
	To       string `json:"to"`
	Timezone string `json:"timezone,omitempty"`
}

// Freeze is a stored freeze window; Active says whether it holds now.
type Freeze struct {
	Name      string            `json:"name"`
	Selector  map[string]string `json:"selector"`
	Reason    string            `json:"reason"`
	StartsAt  *time.Time        `json:"starts_at,omitempty"`
	EndsAt    *time.Time        `json:"ends_at,omitempty"`
	Weekly    *WeeklyWindow     `json:"weekly,omitempty"`
	Active    bool              `json:"active"`
	CreatedBy string            `json:"created_by"`
	CreatedAt time.Time         `json:"created_at"`
}

// FreezeList is the answer to GET /api/v1/freezes.
type FreezeList struct {
	Freezes []Freeze `json:"freezes"`
}

// BlockingFreeze is an active freeze that matches some of a deployment's targets.
type BlockingFreeze struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
	// Targets counts the deployment's targets it matches; FirstTarget names one.
	Targets     int    `json:"targets"`
	FirstTarget string `json:"first_target"`
}

// Query parameters of POST /api/v1/deployments.
const (
	// QueryDryRun set to true answers with a DeploymentPlan and changes nothing.
	QueryDryRun = "dry_run"
	// QueryOverrideFreeze set to true creates the deployment despite active
	// freezes; it needs an admin token, and the override is recorded.
	QueryOverrideFreeze = "override_freeze"
)

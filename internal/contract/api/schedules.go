package api

import (
	"encoding/json"
	"time"
)

// NewSchedule is the body of POST /api/v1/schedules: a deployment spec started
// on a cron expression or at a fixed interval (exactly one of the two).
type NewSchedule struct {
	Name string `json:"name"`
	// Spec is the deployment spec each run starts, as JSON.
	Spec json.RawMessage `json:"spec"`
	// Cron is a standard five-field cron expression ("0 3 * * mon-fri"), in UTC.
	Cron string `json:"cron,omitempty"`
	// Every is an interval such as "1h" or "30m" (at least MinScheduleEvery).
	Every string `json:"every,omitempty"`
}

// Schedule is a deployment schedule as Temporal holds it.
type Schedule struct {
	Name         string      `json:"name"`
	Cron         string      `json:"cron,omitempty"`
	Every        string      `json:"every,omitempty"`
	Deployment   string      `json:"deployment"`
	Paused       bool        `json:"paused"`
	NextRuns     []time.Time `json:"next_runs"`
	RecentRuns   []time.Time `json:"recent_runs"`
	ScheduleID   string      `json:"schedule_id"`
	RunningCount int         `json:"running"`
}

// ScheduleList is the answer to GET /api/v1/schedules.
type ScheduleList struct {
	Schedules []Schedule `json:"schedules"`
}

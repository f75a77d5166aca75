package api

import "time"

// DeploymentPlan is the answer to POST /api/v1/deployments?dry_run=true: what the
// deployment would do if created now. Nothing is written and nothing started.
type DeploymentPlan struct {
	Name     string `json:"name"`
	Priority string `json:"priority"`
	// Targets lists the resolved targets, sorted.
	Targets []string `json:"targets"`
	// Offline lists the targets no live Thorax instance serves now: their commands
	// would wait until one does.
	Offline []string   `json:"offline"`
	Steps   []PlanStep `json:"steps"`
	// Freezes lists the active freezes that would refuse the deployment.
	Freezes []BlockingFreeze `json:"freezes"`
	// Limits lists the concurrency limits that cover some of the targets.
	Limits      []PlanLimit `json:"limits"`
	MaxParallel int         `json:"max_parallel,omitempty"`
	At          time.Time   `json:"at"`
}

// PlanStep is one step of a plan and the batches its targets run in.
type PlanStep struct {
	Position int        `json:"position"`
	Name     string     `json:"name"`
	Command  string     `json:"command"`
	Timeout  string     `json:"timeout"`
	Batches  [][]string `json:"batches"`
}

// PlanLimit is a concurrency limit that would hold some of the plan's requests back.
type PlanLimit struct {
	Name       string `json:"name"`
	MaxRunning int    `json:"max_running"`
	Targets    int    `json:"targets"`
}

package api

import (
	"time"

	"github.com/mantis-deploy/mantis/internal/domain"
)

// Decisions a person takes in a running deployment; each is the name of the Temporal
// Update the API sends to the deployment's workflow.
const (
	DecisionApprove = domain.DecisionApprove
	DecisionReject  = domain.DecisionReject
	DecisionRetry   = domain.DecisionRetry
	DecisionSkip    = domain.DecisionSkip
	DecisionAbort   = domain.DecisionAbort
	DecisionPause   = domain.DecisionPause
	DecisionResume  = domain.DecisionResume
)

// DecisionNames lists every decision.
var DecisionNames = domain.DecisionNames

// MaxDecisionComment bounds a decision's comment, in bytes.
const MaxDecisionComment = 2000

// TimeoutDecider is the "by" of a decision an approval step's timeout took.
const TimeoutDecider = "(timeout)"

// DecisionRequest is the body of POST /api/v1/deployments/{id}/decisions.
type DecisionRequest struct {
	Decision string `json:"decision"`
	Comment  string `json:"comment,omitempty"`
}

// Decision is a recorded decision: what, by which API token, when, at which step.
// It is domain's: the deployment workflow returns it as the result of the decision's
// Update, and the API answers with that result as it is.
type Decision = domain.Decision

// DecisionList is the answer of GET /api/v1/deployments/{id}/decisions.
type DecisionList struct {
	Data []Decision `json:"data"`
}

// Waiting is what a running deployment waits for a person to decide: an approval
// step (kind approval), a failed step that asks (on_failure) or a pause (paused),
// at which step, who may decide (empty: any deploy token) and since when.
type Waiting struct {
	Kind      string     `json:"kind"`
	Step      int        `json:"step"`
	Approvers []string   `json:"approvers,omitempty"`
	Since     time.Time  `json:"since"`
	Deadline  *time.Time `json:"deadline,omitempty"`
}

package domain

import "time"

// Decisions a person takes in a running deployment; each is the name of the Temporal
// Update that carries it to the deployment's workflow.
const (
	DecisionApprove = "approve"
	DecisionReject  = "reject"
	DecisionRetry   = "retry"
	DecisionSkip    = "skip"
	DecisionAbort   = "abort"
	DecisionPause   = "pause"
	DecisionResume  = "resume"
)

// DecisionNames lists every decision.
var DecisionNames = []string{DecisionApprove, DecisionReject, DecisionRetry, DecisionSkip, DecisionAbort, DecisionPause, DecisionResume}

// Decision is a recorded decision: what, by which API token, when, at which step. It
// crosses Temporal (the RecordDecision activity's result, the decision Update's) and
// is the API's answer to a decision (api.Decision), hence the JSON names.
type Decision struct {
	Decision string    `json:"decision"`
	By       string    `json:"by"`
	At       time.Time `json:"at"`
	Step     *int      `json:"step,omitempty"`
	Comment  string    `json:"comment,omitempty"`
}

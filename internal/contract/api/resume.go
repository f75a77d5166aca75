package api

import "github.com/google/uuid"

// Relations of a deployment to the one it was made from (Deployment.Relation).
const (
	// RelationResume: resumed from a step of a deployment that failed or was cancelled.
	RelationResume = "resume"
	// RelationRerun: the same spec run again.
	RelationRerun = "rerun"
)

// ResumeRequest is the body of POST /api/v1/deployments/{id}/resume; both fields
// are optional.
type ResumeRequest struct {
	// FromStep is the 0-based position of the first step to run again; default: the
	// first step that did not succeed.
	FromStep *int `json:"from_step,omitempty"`
	// FailedOnly runs on the targets step FromStep failed on (default true); false
	// runs on every target the deployment had.
	FailedOnly *bool `json:"failed_only,omitempty"`
}

// MaxResumeBody caps the body of a resume request.
const MaxResumeBody = 4 << 10

// ResumedDeployment is the answer to POST /api/v1/deployments/{id}/resume and
// .../rerun: the create answer, the deployment it was made from, the step a resume
// starts from and the targets left out because they are no longer registered.
type ResumedDeployment struct {
	ID      uuid.UUID `json:"id"`
	Status  string    `json:"status"`
	Created bool      `json:"created"`
	Links   Links     `json:"links"`
	// Relation is RelationResume or RelationRerun.
	Relation    string    `json:"relation"`
	ResumedFrom uuid.UUID `json:"resumed_from"`
	// FromStep is set for a resume.
	FromStep *int `json:"from_step,omitempty"`
	// Targets are the targets the new deployment runs on (a resume's; a re-run
	// resolves its spec's targets again when it starts).
	Targets []string `json:"targets,omitempty"`
	// LeftOut are targets that are no longer registered, left out of a resume.
	LeftOut []string `json:"left_out,omitempty"`
}

// Related is the answer of a resume or a re-run made from the create answer c.
func Related(c CreatedDeployment, relation string, from uuid.UUID) ResumedDeployment {
	return ResumedDeployment{ID: c.ID, Status: c.Status, Created: c.Created, Links: c.Links, Relation: relation, ResumedFrom: from}
}

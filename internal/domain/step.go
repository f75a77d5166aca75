package domain

// TargetResult is how one target's step ended.
type TargetResult struct {
	Target   string `json:"target"`
	Status   string `json:"status"` // CommandSucceeded or CommandFailed
	ExitCode *int   `json:"exit_code,omitempty"`
	Error    string `json:"error,omitempty"`
}

// StepProgress is where a step stands: counts, and up to MaxFailedTargetsShown failed
// targets. It never lists the targets themselves.
type StepProgress struct {
	Total     int `json:"total"`
	Enqueued  int `json:"enqueued"`
	Succeeded int `json:"succeeded"`
	Failed    int `json:"failed"`
	// Running is enqueued and not yet ended.
	Running int `json:"running"`
	// Skipped is what the step will never enqueue (it stopped on a failure).
	Skipped int `json:"skipped"`
	// Done is set once the step has ended and is recorded with Status.
	Done bool `json:"done"`
	// BatchDone is set when the window's batch has ended (nothing of it runs and
	// nothing more of it will start) while the step goes on with later batches.
	BatchDone     bool           `json:"batch_done,omitempty"`
	Status        string         `json:"status,omitempty"`
	FailedTargets []TargetResult `json:"failed_targets,omitempty"`
}

// StepWindow narrows what AdvanceStepIn starts: the zero window is the whole step on
// every target, stopping at the first failure unless the step continues on error.
type StepWindow struct {
	// Scope, when above zero, makes the step's targets the first Scope of the
	// deployment's, in order (a rollback on the targets the deployment touched, a
	// verify on the canary batch).
	Scope int `json:"scope,omitempty"`
	// Only, when set, makes the step's target this one (a verify on one host); it
	// need not be one of the deployment's.
	Only string `json:"only,omitempty"`
	// BatchEnd, when above zero, lets only the targets before it start: the end of
	// the rollout batch running now.
	BatchEnd int `json:"batch_end,omitempty"`
	// FailureRoom, when set, is how many of the step's targets may fail before it
	// starts no more: what is left of the deployment's failure budget. It replaces
	// the stop at the first failure.
	FailureRoom *int `json:"failure_room,omitempty"`
}

// Total is how many targets a step has within w, of the deployment's n.
func (w StepWindow) Total(n int) int {
	switch {
	case w.Only != "":
		return 1
	case w.Scope > 0:
		return min(w.Scope, n)
	}
	return n
}

// End is how many of the step's total targets may have started by now.
func (w StepWindow) End(total int) int {
	if w.BatchEnd > 0 {
		return min(w.BatchEnd, total)
	}
	return total
}

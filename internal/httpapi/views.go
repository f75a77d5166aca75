package httpapi

import (
	"github.com/mantis-deploy/mantis/internal/api"
	"github.com/mantis-deploy/mantis/schema"
)

// The API's types are its own (package api); these turn the schema's views into
// them, so that a change to a stored view does not change the JSON on the wire.

// deploymentOf is d as the API shows it.
func deploymentOf(d schema.DeploymentView) api.Deployment {
	out := api.Deployment{
		ID: d.ID, Name: d.Name, Priority: d.Priority, Status: d.Status, IdempotencyKey: d.IdempotencyKey,
		CreatedBy: d.CreatedBy, Error: d.Error, CreatedAt: d.CreatedAt, StartedAt: d.StartedAt, FinishedAt: d.FinishedAt,
		Spec: d.Spec,
	}
	if d.Steps != nil {
		out.Steps = make([]api.Step, len(d.Steps))
	}
	for i, s := range d.Steps {
		out.Steps[i] = stepOf(s)
	}
	return out
}

func stepOf(s schema.StepView) api.Step {
	out := api.Step{
		Position: s.Position, Name: s.Name, Command: s.Command, Status: s.Status, ContinueOnError: s.ContinueOnError,
		StartedAt: s.StartedAt, FinishedAt: s.FinishedAt, Counts: api.StepCounts(s.Counts),
	}
	if s.Targets != nil {
		out.Targets = make([]api.TargetResult, len(s.Targets))
	}
	for i, t := range s.Targets {
		out.Targets[i] = api.TargetResult{
			Target: t.Target, Status: t.Status, ExitCode: t.ExitCode, OutputTail: t.OutputTail, Truncated: t.Truncated,
			Error: t.Error, Attempts: t.Attempts, StartedAt: t.StartedAt, FinishedAt: t.FinishedAt,
		}
		if a := t.Analysis; a != nil {
			out.Targets[i].Analysis = &api.Analysis{Status: a.Status, Category: a.Category, Summary: a.Summary, Suggestion: a.Suggestion}
		}
	}
	return out
}

// dispatchRequestOf is v as the API shows it.
func dispatchRequestOf(v schema.DispatchRequestView) api.DispatchRequest {
	return api.DispatchRequest{
		ID: v.ID, IdempotencyKey: v.IdempotencyKey, Target: v.Target, DeploymentID: v.DeploymentID, StepPosition: v.StepPosition,
		Command: v.Command, Priority: v.Priority, Status: v.Status, Attempts: v.Attempts, MaxAttempts: v.MaxAttempts,
		CreatedAt: v.CreatedAt, ExpiresAt: v.ExpiresAt, NextAttemptAt: v.NextAttemptAt, ClaimedBy: v.ClaimedBy,
		ClaimedAt: v.ClaimedAt, ClaimEpoch: v.ClaimEpoch, DispatchedAt: v.DispatchedAt, FinishedAt: v.FinishedAt,
		LastError: v.LastError, CommandID: v.CommandID, CommandStatus: v.CommandStatus, Reason: v.Reason,
	}
}

// enqueueAnswerOf is the answer to an enqueue that stored out.
func enqueueAnswerOf(out []schema.EnqueuedRequest) api.EnqueueAnswer {
	a := api.EnqueueAnswer{Requests: make([]api.EnqueuedRequest, len(out))}
	for i, o := range out {
		a.Requests[i] = api.EnqueuedRequest{ID: o.ID, IdempotencyKey: o.IdempotencyKey, Created: o.Created, ExpiresAt: o.ExpiresAt}
	}
	return a
}

// targetOf is t as the API shows it.
func targetOf(t schema.Target) api.Target {
	return api.Target{
		ID: t.ID, Name: t.Name, Mode: t.Mode, Address: t.Address, Labels: t.Labels,
		AssignedInstanceID: t.AssignedInstanceID, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt,
	}
}

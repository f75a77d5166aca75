package httpapi

import (
	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/internal/mandible/freeze"
	"github.com/mantis-deploy/mantis/schema"
)

// The API's types are its own (package api) and the store's are schema's: these turn
// one into the other, one function per resource, so that a change to a stored row
// does not change the JSON on the wire, nor a change to the wire the store.

// enqueueAnswerOf is the answer to an enqueue that stored out.
func enqueueAnswerOf(out []schema.EnqueuedRequest) api.EnqueueAnswer {
	a := api.EnqueueAnswer{Requests: make([]api.EnqueuedRequest, len(out))}
	for i, o := range out {
		a.Requests[i] = api.EnqueuedRequest{ID: o.ID, IdempotencyKey: o.IdempotencyKey, Created: o.Created, ExpiresAt: o.ExpiresAt}
	}
	return a
}

// deploymentOf is a deployment as the API shows it.
func deploymentOf(d schema.DeploymentView) api.Deployment {
	return api.Deployment{
		ID: d.ID, Name: d.Name, Priority: d.Priority, Status: d.Status, IdempotencyKey: d.IdempotencyKey,
		CreatedBy: d.CreatedBy, Error: d.Error, CreatedAt: d.CreatedAt, StartedAt: d.StartedAt, FinishedAt: d.FinishedAt,
		Spec: d.Spec, Steps: mapped(d.Steps, stepOf), Waiting: waitingOf(d.Waiting),
		PreviousDeploymentID: d.PreviousDeploymentID, Relation: d.Relation, FromStep: d.FromStep,
	}
}

// stepOf is a step as the API shows it.
func stepOf(s schema.StepView) api.Step {
	return api.Step{
		Position: s.Position, Name: s.Name, Command: s.Command, Status: s.Status, ContinueOnError: s.ContinueOnError,
		StartedAt: s.StartedAt, FinishedAt: s.FinishedAt, Targets: mapped(s.Targets, targetResultOf),
		Counts: api.StepCounts{Queued: s.Counts.Queued, Running: s.Counts.Running, Succeeded: s.Counts.Succeeded, Failed: s.Counts.Failed},
	}
}

// targetResultOf is a target's result in a step as the API shows it.
func targetResultOf(t schema.TargetView) api.TargetResult {
	out := api.TargetResult{
		Target: t.Target, Status: t.Status, ExitCode: t.ExitCode, OutputTail: t.OutputTail, Truncated: t.Truncated,
		Error: t.Error, Attempts: t.Attempts, StartedAt: t.StartedAt, FinishedAt: t.FinishedAt,
	}
	if a := t.Analysis; a != nil {
		out.Analysis = &api.Analysis{Status: a.Status, Category: a.Category, Summary: a.Summary, Suggestion: a.Suggestion}
	}
	return out
}

// waitingOf is what a deployment waits for as the API shows it; nil for nothing.
func waitingOf(w *schema.Waiting) *api.Waiting {
	if w == nil {
		return nil
	}
	return &api.Waiting{Kind: w.Kind, Step: w.Step, Approvers: w.Approvers, Since: w.Since, Deadline: w.Deadline}
}

// dispatchRequestOf is a dispatch request as the API shows it.
func dispatchRequestOf(v schema.DispatchRequestView) api.DispatchRequest {
	return api.DispatchRequest{
		ID: v.ID, IdempotencyKey: v.IdempotencyKey, Target: v.Target, DeploymentID: v.DeploymentID,
		StepPosition: v.StepPosition, Command: v.Command, Priority: v.Priority, Status: v.Status, Attempts: v.Attempts,
		MaxAttempts: v.MaxAttempts, CreatedAt: v.CreatedAt, ExpiresAt: v.ExpiresAt, NextAttemptAt: v.NextAttemptAt,
		ClaimedBy: v.ClaimedBy, ClaimedAt: v.ClaimedAt, ClaimEpoch: v.ClaimEpoch, DispatchedAt: v.DispatchedAt,
		FinishedAt: v.FinishedAt, LastError: v.LastError, CommandID: v.CommandID, CommandStatus: v.CommandStatus,
		HeldBy: v.HeldBy, Reason: v.Reason,
	}
}

// thoraxInstanceOf is a Thorax instance as the API shows it.
func thoraxInstanceOf(i schema.ThoraxInstanceView) api.ThoraxInstance {
	return api.ThoraxInstance{
		ID: i.ID, Name: i.Name, CertName: i.CertName, Scoped: i.Scoped, Status: i.Status, Version: i.Version, Live: i.Live,
		RegisteredAt: i.RegisteredAt, LastHeartbeatAt: i.LastHeartbeatAt, DiedAt: i.DiedAt, Targets: i.Targets,
	}
}

// targetOf is a registered target as the API shows it.
func targetOf(t schema.Target) api.Target {
	return api.Target{
		ID: t.ID, Name: t.Name, Mode: t.Mode, Address: t.Address, Labels: t.Labels,
		AssignedInstanceID: t.AssignedInstanceID, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt,
	}
}

// limitOf is a stored concurrency limit as the API shows it.
func limitOf(l schema.Limit) api.Limit {
	return api.Limit{
		Name: l.Name, Scope: l.Scope, Label: l.Label, Value: l.Value, MaxRunning: l.MaxRunning,
		CreatedBy: l.CreatedBy, CreatedAt: &l.CreatedAt, UpdatedAt: &l.UpdatedAt,
	}
}

// newLimit is the limit a POST /api/v1/limits body sets; the record of the last
// write is Mandible's, so the body's is dropped.
func newLimit(l api.Limit) schema.Limit {
	return schema.Limit{Name: l.Name, Scope: l.Scope, Label: l.Label, Value: l.Value, MaxRunning: l.MaxRunning}
}

// planLimitOf is a limit covering some of a plan's targets as the API shows it.
func planLimitOf(l schema.LimitCoverage) api.PlanLimit {
	return api.PlanLimit{Name: l.Name, MaxRunning: l.MaxRunning, Targets: l.Targets}
}

// webhookOf is a stored webhook as the API shows it.
func webhookOf(w schema.Webhook) api.Webhook {
	return api.Webhook{
		ID: w.ID, URL: w.URL, EventTypes: w.EventTypes, AllowPrivateNetwork: w.AllowPrivateNetwork,
		CreatedBy: w.CreatedBy, CreatedAt: w.CreatedAt,
	}
}

// webhookDeliveryOf is a webhook delivery as the API shows it.
func webhookDeliveryOf(d schema.WebhookDelivery) api.WebhookDelivery {
	return api.WebhookDelivery{
		ID: d.ID, EventID: d.EventID, EventType: d.EventType, DeploymentID: d.DeploymentID, Status: d.Status,
		Attempts: d.Attempts, LastStatus: d.LastStatus, LastError: d.LastError, CreatedAt: d.CreatedAt, EndedAt: d.EndedAt,
	}
}

// freezeOf is a stored freeze as the API shows it.
func freezeOf(f schema.Freeze) api.Freeze {
	return api.Freeze{
		Name: f.Name, Selector: f.Selector, Reason: f.Reason, StartsAt: f.StartsAt, EndsAt: f.EndsAt,
		Weekly: weeklyOf(f.Weekly), Active: f.Active, CreatedBy: f.CreatedBy, CreatedAt: f.CreatedAt,
	}
}

// freezeDefinition is the freeze a POST /api/v1/freezes body defines.
func freezeDefinition(f api.NewFreeze) freeze.Definition {
	d := freeze.Definition{Name: f.Name, Selector: f.Selector, Reason: f.Reason, StartsAt: f.StartsAt, EndsAt: f.EndsAt}
	if w := f.Weekly; w != nil {
		d.Weekly = &freeze.WeeklyWindow{Days: w.Days, From: w.From, To: w.To, Timezone: w.Timezone}
	}
	return d
}

// weeklyOf is a weekly window as the API shows it; nil for none.
func weeklyOf(w *freeze.WeeklyWindow) *api.WeeklyWindow {
	if w == nil {
		return nil
	}
	return &api.WeeklyWindow{Days: w.Days, From: w.From, To: w.To, Timezone: w.Timezone}
}

// blockingFreezeOf is a freeze that refuses a deployment as the API shows it.
func blockingFreezeOf(f schema.BlockingFreeze) api.BlockingFreeze {
	return api.BlockingFreeze{Name: f.Name, Reason: f.Reason, Targets: f.Targets, FirstTarget: f.FirstTarget}
}

// fieldProblemsOf is the fields member of a 400 that refuses a request for ps.
func fieldProblemsOf(ps domain.Problems) []api.FieldProblem {
	return mapped(ps, func(p domain.FieldProblem) api.FieldProblem {
		return api.FieldProblem{Field: p.Field, Problem: p.Problem}
	})
}

// mapped is items each turned by f, nil for nil: a list the store leaves nil stays
// null (or omitted) on the wire and an empty one stays [].
func mapped[S, T any](items []S, f func(S) T) []T {
	if items == nil {
		return nil
	}
	out := make([]T, len(items))
	for i, item := range items {
		out[i] = f(item)
	}
	return out
}

// nonNil is items, or an empty list for none, so that a list answers [] and never
// null.
func nonNil[T any](items []T) []T {
	if items == nil {
		return []T{}
	}
	return items
}

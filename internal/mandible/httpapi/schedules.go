package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/contract/spec"
	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/schema"
	"github.com/mantis-deploy/mantis/workflows"
)

// Schedule names in Temporal: the schedule "deployment-schedule:<name>" starts
// Deployment workflows "scheduled:<name>-<time>" (Temporal appends the time).
const (
	ScheduleIDPrefix         = "deployment-schedule:"
	ScheduledWorkflowPrefix  = "scheduled:"
	MinScheduleEvery         = time.Second
	MaxScheduleEvery         = 366 * 24 * time.Hour
	maxCronBytes             = 256
	scheduleDescribeDeadline = 5 * time.Second
)

// ScheduleID is the Temporal schedule id of the schedule name.
func ScheduleID(name string) string { return ScheduleIDPrefix + name }

var scheduleName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// createSchedule records a schedule in the catalogue and creates its Temporal
// Schedule, which starts the Deployment workflow with the spec at each time. A
// Temporal refusal (a bad cron expression) takes the catalogue row back out.
func (s *server) createSchedule(w http.ResponseWriter, r *http.Request) {
	var body api.NewSchedule
	if !decodeJSON(w, r, s.maxBody, &body) {
		return
	}
	every, ok := scheduleTiming(w, r, body)
	if !ok {
		return
	}
	d, ok := s.scheduledSpec(w, r, body.Spec)
	if !ok {
		return
	}
	err := schema.CreateSchedule(r.Context(), s.db, schema.Schedule{Name: body.Name, Cron: body.Cron, Every: every, Spec: body.Spec, CreatedBy: actor(r)})
	if errors.Is(err, schema.ErrScheduleExists) {
		api.WriteError(w, r, http.StatusConflict, api.CodeAlreadyExists, fmt.Sprintf("a schedule named %q already exists; delete it first", body.Name))
		return
	}
	if err != nil {
		writeServerError(w, r, s.logger, err)
		return
	}
	if err := s.createTemporalSchedule(r, body, every, d); err != nil {
		var invalid *serviceerror.InvalidArgument
		refused, exists := errors.As(err, &invalid), errors.Is(err, temporal.ErrScheduleAlreadyRunning)
		s.undoScheduleCreate(r, body.Name, !refused && !exists)
		switch {
		case refused:
			api.WriteError(w, r, http.StatusBadRequest, api.CodeInvalidArgument, "Temporal refused the schedule",
				api.FieldProblem{Field: "cron", Problem: invalid.Message})
		case exists:
			api.WriteError(w, r, http.StatusConflict, api.CodeAlreadyExists, fmt.Sprintf(
				"Temporal already has a schedule %q that the catalogue does not list; delete it there first", ScheduleID(body.Name)))
		default:
			writeServerError(w, r, s.logger, err)
		}
		return
	}
	s.logger.InfoContext(r.Context(), "schedule created", "schedule", body.Name, "cron", body.Cron, "every", every, "actor", actor(r))
	api.WriteJSON(w, http.StatusCreated, s.scheduleView(r.Context(), schema.Schedule{Name: body.Name, Cron: body.Cron, Every: every}, d.Name))
}

// undoScheduleCreate takes a schedule whose Temporal side failed back out of the
// catalogue. With maybeMade (Temporal did not refuse it outright) the Temporal
// schedule is deleted too: a create whose answer was lost may have made it, and a
// retry of the request must not find it there.
func (s *server) undoScheduleCreate(r *http.Request, name string, maybeMade bool) {
	ctx := context.WithoutCancel(r.Context())
	if maybeMade {
		ctx, cancel := context.WithTimeout(ctx, scheduleDescribeDeadline)
		defer cancel()
		var notFound *serviceerror.NotFound
		if err := s.temporal.ScheduleClient().GetHandle(ctx, ScheduleID(name)).Delete(ctx); err != nil && !errors.As(err, &notFound) {
			s.logger.WarnContext(ctx, "a failed schedule create left its Temporal schedule; delete it by hand",
				"schedule", ScheduleID(name), "err", err)
		}
	}
	_ = schema.DeleteSchedule(ctx, s.db, name)
}

// scheduleTiming checks the name and that exactly one of cron and every is set,
// answering 400 naming each problem; it returns the interval of every.
func scheduleTiming(w http.ResponseWriter, r *http.Request, body api.NewSchedule) (time.Duration, bool) {
	var problems []api.FieldProblem
	if !scheduleName.MatchString(body.Name) {
		problems = append(problems, api.FieldProblem{Field: "name", Problem: "required: letters, digits, '.', '_' or '-', at most 64"})
	}
	var every time.Duration
	switch {
	case (body.Cron == "") == (body.Every == ""):
		problems = append(problems, api.FieldProblem{Field: "cron", Problem: "give exactly one of cron and every"})
	case len(body.Cron) > maxCronBytes:
		problems = append(problems, api.FieldProblem{Field: "cron", Problem: fmt.Sprintf("at most %d bytes", maxCronBytes)})
	case body.Every != "":
		var err error
		if every, err = time.ParseDuration(body.Every); err != nil || every < MinScheduleEvery || every > MaxScheduleEvery {
			problems = append(problems, api.FieldProblem{Field: "every",
				Problem: fmt.Sprintf("must be a duration from %s to %s such as \"1h\", got %.30q", MinScheduleEvery, MaxScheduleEvery, body.Every)})
		}
	}
	if len(problems) > 0 {
		api.WriteError(w, r, http.StatusBadRequest, api.CodeInvalidArgument, "invalid schedule", problems...)
		return 0, false
	}
	return every, true
}

// scheduledSpec reads a schedule's spec. Besides what any spec must pass, it may
// carry no idempotency key or deployment id (every run is a deployment of its own)
// and no env_secret (sealing is per deployment, and a schedule's input stays in
// Temporal for as long as the schedule lives).
func (s *server) scheduledSpec(w http.ResponseWriter, r *http.Request, raw []byte) (spec.Deployment, bool) {
	d, err := spec.Parse(raw)
	if err != nil {
		writeSpecError(w, r, err)
		return spec.Deployment{}, false
	}
	var problems []api.FieldProblem
	if d.IdempotencyKey != "" || d.DeploymentID != "" {
		problems = append(problems, api.FieldProblem{Field: "spec.idempotency_key", Problem: "a scheduled spec takes no idempotency_key or deployment_id: every run is a new deployment"})
	}
	for i, st := range d.Steps {
		if len(st.EnvSecret) > 0 {
			problems = append(problems, api.FieldProblem{Field: fmt.Sprintf("spec.steps[%d].env_secret", i), Problem: "not taken by schedules; use a file: or env: reference in env on the agent's side"})
		}
	}
	if len(problems) > 0 {
		api.WriteError(w, r, http.StatusBadRequest, api.CodeInvalidSpec, "invalid scheduled spec", problems...)
		return spec.Deployment{}, false
	}
	d = d.WithDefaults()
	if _, err := schema.ResolveTargets(r.Context(), s.db, d.Targets, d.TargetSelector); err != nil {
		var inputErr *domain.InputError
		if errors.As(err, &inputErr) {
			writeInputError(w, r, inputErr)
		} else {
			writeServerError(w, r, s.logger, err)
		}
		return spec.Deployment{}, false
	}
	return d, true
}

// createTemporalSchedule creates the Temporal Schedule that starts d. Runs do not
// overlap: a time that comes while the last run is still going is skipped.
func (s *server) createTemporalSchedule(r *http.Request, body api.NewSchedule, every time.Duration, d spec.Deployment) error {
	var when client.ScheduleSpec
	if every > 0 {
		when.Intervals = []client.ScheduleIntervalSpec{{Every: every}}
	} else {
		when.CronExpressions = []string{body.Cron}
	}
	_, err := s.temporal.ScheduleClient().Create(r.Context(), client.ScheduleOptions{
		ID:      ScheduleID(body.Name),
		Spec:    when,
		Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
		Note:    "created through the Mantis API by " + actor(r),
		Action: &client.ScheduleWorkflowAction{
			ID: ScheduledWorkflowPrefix + body.Name, Workflow: workflows.DeploymentWorkflowType, Args: []any{d},
			TaskQueue: s.deploymentQueue, Memo: map[string]any{MemoCreatedBy: actor(r)},
			StaticSummary: fmt.Sprintf("Deployment %s (schedule %s)", d.Name, body.Name),
		},
	})
	if err != nil {
		return fmt.Errorf("creating Temporal schedule %s: %w", body.Name, err)
	}
	return nil
}

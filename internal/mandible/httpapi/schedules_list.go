package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"go.temporal.io/api/serviceerror"

	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/contract/spec"
	"github.com/mantis-deploy/mantis/schema"
)

// maxRunTimes bounds the next and recent run times a schedule shows.
const maxRunTimes = 5

func (s *server) listSchedules(w http.ResponseWriter, r *http.Request) {
	rows, err := schema.ListSchedules(r.Context(), s.db)
	if err != nil {
		writeServerError(w, r, s.logger, err)
		return
	}
	out := api.ScheduleList{Schedules: make([]api.Schedule, len(rows))}
	for i, row := range rows {
		out.Schedules[i] = s.scheduleView(r.Context(), row, scheduledDeployment(row))
	}
	api.WriteJSON(w, http.StatusOK, out)
}

// getSchedule answers GET /api/v1/schedules/{name}: one schedule, as listed.
func (s *server) getSchedule(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	row, err := schema.GetSchedule(r.Context(), s.db, name)
	if writeLookupError(w, r, s.logger, err, fmt.Sprintf("no schedule named %.70q", name)) {
		return
	}
	api.WriteJSON(w, http.StatusOK, s.scheduleView(r.Context(), row, scheduledDeployment(row)))
}

// scheduledDeployment is the name of the deployment a schedule starts; "" when its
// stored spec no longer parses.
func scheduledDeployment(row schema.Schedule) string {
	d, err := spec.Parse(row.Spec)
	if err != nil {
		return ""
	}
	return d.Name
}

// scheduleView is a catalogue row with what Temporal says of it now: paused, the
// next and recent runs. A schedule Temporal does not answer for shows without them.
func (s *server) scheduleView(ctx context.Context, row schema.Schedule, deployment string) api.Schedule {
	v := api.Schedule{Name: row.Name, Cron: row.Cron, Deployment: deployment, ScheduleID: ScheduleID(row.Name),
		NextRuns: []time.Time{}, RecentRuns: []time.Time{}}
	if row.Every > 0 {
		v.Every = row.Every.String()
	}
	ctx, cancel := context.WithTimeout(ctx, scheduleDescribeDeadline)
	defer cancel()
	desc, err := s.temporal.ScheduleClient().GetHandle(ctx, ScheduleID(row.Name)).Describe(ctx)
	if err != nil {
		s.logger.WarnContext(ctx, "describing schedule failed", "schedule", row.Name, "err", err)
		return v
	}
	v.Paused = desc.Schedule.State != nil && desc.Schedule.State.Paused
	v.RunningCount = len(desc.Info.RunningWorkflows)
	for i, t := range desc.Info.NextActionTimes {
		if i < maxRunTimes {
			v.NextRuns = append(v.NextRuns, t)
		}
	}
	recent := desc.Info.RecentActions
	for _, a := range recent[max(0, len(recent)-maxRunTimes):] {
		v.RecentRuns = append(v.RecentRuns, a.ActualTime)
	}
	return v
}

// deleteSchedule deletes the Temporal Schedule (runs already started go on) and
// its catalogue row.
func (s *server) deleteSchedule(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	err := s.temporal.ScheduleClient().GetHandle(r.Context(), ScheduleID(name)).Delete(r.Context())
	var missing *serviceerror.NotFound
	inTemporal := !errors.As(err, &missing)
	if err != nil && inTemporal {
		writeServerError(w, r, s.logger, fmt.Errorf("deleting Temporal schedule %s: %w", name, err))
		return
	}
	err = schema.DeleteSchedule(r.Context(), s.db, name)
	if errors.Is(err, schema.ErrNotFound) && !inTemporal {
		api.WriteError(w, r, http.StatusNotFound, api.CodeNotFound, fmt.Sprintf("no schedule named %.70q", name))
		return
	}
	if err != nil && !errors.Is(err, schema.ErrNotFound) {
		writeServerError(w, r, s.logger, err)
		return
	}
	s.logger.InfoContext(r.Context(), "schedule deleted", "schedule", name, "actor", actor(r))
	w.WriteHeader(http.StatusNoContent)
}

package schema

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/mantis-deploy/mantis/schema/internal/dbsqlc"
)

// ErrScheduleExists is returned when a schedule of that name already exists.
var ErrScheduleExists = errors.New("a schedule of that name already exists")

// MaxSchedules bounds how many schedules the catalogue lists.
const MaxSchedules = 500

// Schedule is a deployment schedule as the catalogue holds it: Cron or Every.
type Schedule struct {
	Name      string
	Cron      string
	Every     time.Duration
	Spec      []byte
	CreatedBy string
	CreatedAt time.Time
}

// CreateSchedule records a schedule; ErrScheduleExists when the name is taken.
func CreateSchedule(ctx context.Context, db DB, s Schedule) error {
	var every pgtype.Interval
	if s.Every > 0 {
		every = pgtype.Interval{Microseconds: s.Every.Microseconds(), Valid: true}
	}
	_, err := queries.InsertSchedule(ctx, db, dbsqlc.InsertScheduleParams{
		Name: s.Name, Cron: nullString(s.Cron), Every: every, Spec: s.Spec, CreatedBy: s.CreatedBy,
	})
	if err = notFound(err); errors.Is(err, ErrNotFound) {
		return ErrScheduleExists
	}
	if err != nil {
		return fmt.Errorf("recording schedule %s: %w", s.Name, err)
	}
	return nil
}

// ListSchedules returns the schedules by name, at most MaxSchedules.
func ListSchedules(ctx context.Context, db DB) ([]Schedule, error) {
	rows, err := queries.ListSchedules(ctx, db, MaxSchedules)
	if err != nil {
		return nil, fmt.Errorf("listing schedules: %w", err)
	}
	out := make([]Schedule, len(rows))
	for i, r := range rows {
		out[i] = scheduleOf(r)
	}
	return out, nil
}

// GetSchedule returns the schedule named name; ErrNotFound when there is none.
func GetSchedule(ctx context.Context, db DB, name string) (Schedule, error) {
	r, err := queries.GetSchedule(ctx, db, name)
	if err != nil {
		return Schedule{}, fmt.Errorf("reading schedule %s: %w", name, notFound(err))
	}
	return scheduleOf(r), nil
}

// scheduleOf is the Schedule a catalogue row holds.
func scheduleOf(r dbsqlc.DeploymentSchedule) Schedule {
	s := Schedule{Name: r.Name, Spec: r.Spec, CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt}
	if r.Cron != nil {
		s.Cron = *r.Cron
	}
	if r.Every.Valid {
		s.Every = time.Duration(r.Every.Microseconds)*time.Microsecond +
			time.Duration(r.Every.Days)*24*time.Hour + time.Duration(r.Every.Months)*30*24*time.Hour
	}
	return s
}

// DeleteSchedule removes a schedule from the catalogue; ErrNotFound when there is none.
func DeleteSchedule(ctx context.Context, db DB, name string) error {
	n, err := queries.DeleteSchedule(ctx, db, name)
	return touched(n, err, "deleting schedule "+name)
}

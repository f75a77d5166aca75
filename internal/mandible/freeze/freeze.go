// Package freeze decides when a freeze window holds: its validation and ActiveAt, the
// pure logic shared by the API (which refuses a deployment at creation) and the
// StartDeployment activity (which refuses one started from any Temporal client).
package freeze

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/mantis-deploy/mantis/internal/contract/api"
)

// Bounds on what a freeze may hold.
const (
	MaxReasonBytes   = 1024
	MaxSelectorKeys  = 64
	MaxLabelBytes    = 1024
	MaxTimezoneBytes = 64
)

// Days are the day names of a WeeklyWindow, Sunday first as time.Weekday counts.
var Days = []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}

var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// Problems returns every problem of f, each "field: problem", or none.
func Problems(f api.NewFreeze) []string {
	var out []string
	add := func(field, format string, args ...any) { out = append(out, field+": "+fmt.Sprintf(format, args...)) }
	if !namePattern.MatchString(f.Name) {
		add("name", "required: letters, digits, '.', '_' or '-', at most 128")
	}
	if strings.TrimSpace(f.Reason) == "" {
		add("reason", "required")
	} else if len(f.Reason) > MaxReasonBytes || strings.ContainsRune(f.Reason, 0) {
		add("reason", "at most %d bytes, no NUL", MaxReasonBytes)
	}
	if len(f.Selector) > MaxSelectorKeys {
		add("selector", "at most %d labels, got %d", MaxSelectorKeys, len(f.Selector))
	}
	for k, v := range f.Selector {
		if k == "" || len(k)+len(v) > MaxLabelBytes || strings.ContainsRune(k+v, 0) {
			add("selector", "label %.40q: keys must not be empty, key and value at most %d bytes together", k, MaxLabelBytes)
		}
	}
	if f.StartsAt != nil && f.EndsAt != nil && !f.StartsAt.Before(*f.EndsAt) {
		add("ends_at", "must be after starts_at")
	}
	if f.Weekly != nil {
		out = append(out, weeklyProblems(*f.Weekly)...)
	}
	return out
}

// weeklyProblems returns every problem of a weekly window.
func weeklyProblems(w api.WeeklyWindow) []string {
	var out []string
	if len(w.Days) == 0 || len(w.Days) > 7 {
		out = append(out, "weekly.days: between 1 and 7 of "+strings.Join(Days, ", "))
	}
	for i, d := range w.Days {
		if !slices.Contains(Days, d) {
			out = append(out, fmt.Sprintf("weekly.days[%d]: must be one of %s, got %.20q", i, strings.Join(Days, ", "), d))
		}
	}
	if _, err := clock(w.From); err != nil {
		out = append(out, "weekly.from: "+err.Error())
	}
	if _, err := clock(w.To); err != nil {
		out = append(out, "weekly.to: "+err.Error())
	}
	if len(w.Timezone) > MaxTimezoneBytes {
		out = append(out, fmt.Sprintf("weekly.timezone: at most %d bytes", MaxTimezoneBytes))
	} else if _, err := time.LoadLocation(w.Timezone); err != nil {
		out = append(out, fmt.Sprintf("weekly.timezone: unknown time zone %q", w.Timezone))
	}
	return out
}

// clock parses "HH:MM" into the time since midnight.
func clock(s string) (time.Duration, error) {
	t, err := time.Parse("15:04", s)
	if err != nil || len(s) != 5 {
		return 0, fmt.Errorf("must be HH:MM on a 24-hour clock, got %.20q", s)
	}
	return time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute, nil
}

// Window is when a freeze holds: StartsAt and EndsAt bound it (nil is open), and
// Weekly, when set, narrows it to a weekly window.
type Window struct {
	StartsAt *time.Time
	EndsAt   *time.Time
	Weekly   *api.WeeklyWindow
}

// ActiveAt reports whether the window holds at now. A weekly window with a bad
// spec (which Problems refuses) never holds.
func (w Window) ActiveAt(now time.Time) bool {
	if w.StartsAt != nil && now.Before(*w.StartsAt) {
		return false
	}
	if w.EndsAt != nil && !now.Before(*w.EndsAt) {
		return false
	}
	if w.Weekly == nil {
		return true
	}
	return weeklyActive(*w.Weekly, now)
}

// weeklyActive reports whether now falls in a window opened on one of the days
// at From, today's or yesterday's (a window lasts at most 24 hours).
func weeklyActive(w api.WeeklyWindow, now time.Time) bool {
	loc, err := time.LoadLocation(w.Timezone)
	from, errFrom := clock(w.From)
	to, errTo := clock(w.To)
	if err != nil || errFrom != nil || errTo != nil {
		return false
	}
	length := to - from
	if length <= 0 {
		length += 24 * time.Hour
	}
	local := now.In(loc)
	for back := 0; back <= 1; back++ {
		day := local.AddDate(0, 0, -back)
		if !slices.Contains(w.Days, Days[day.Weekday()]) {
			continue
		}
		midnight := time.Date(day.Year(), day.Month(), day.Day(), 0, 0, 0, 0, loc)
		opens := midnight.Add(from)
		if !local.Before(opens) && local.Before(opens.Add(length)) {
			return true
		}
	}
	return false
}

// Package freeze decides when a freeze window holds: its validation and ActiveAt, the
// pure logic shared by the API (which refuses a deployment at creation) and the
// StartDeployment activity (which refuses one started from any Temporal client).
// The store keeps freezes in these types; the API maps its own to them.
package freeze

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/mantis-deploy/mantis/internal/domain"
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

// Definition is a freeze window as its author defines it: it refuses deployments on
// the targets Selector matches (every key=value; empty matches all), from StartsAt
// (open when nil) until EndsAt (open when nil) and, when Weekly is set, only inside
// that weekly window.
type Definition struct {
	Name     string
	Selector map[string]string
	Reason   string
	StartsAt *time.Time
	EndsAt   *time.Time
	Weekly   *WeeklyWindow
}

// WeeklyWindow is a window that opens on each of Days (mon, tue, ...) at From
// ("HH:MM", local time of Timezone, UTC when empty) and closes at the next To: a To
// at or before From closes on the next day, and To equal to From lasts 24 hours. The
// store keeps it as JSON, under these names.
type WeeklyWindow struct {
	Days     []string `json:"days"`
	From     string   `json:"from"`
	To       string   `json:"to"`
	Timezone string   `json:"timezone,omitempty"`
}

// Problems returns every problem of f by field, or none.
func Problems(f Definition) domain.Problems {
	var out domain.Problems
	if !namePattern.MatchString(f.Name) {
		out.Add("name", "required: letters, digits, '.', '_' or '-', at most 128")
	}
	if strings.TrimSpace(f.Reason) == "" {
		out.Add("reason", "required")
	} else if len(f.Reason) > MaxReasonBytes || strings.ContainsRune(f.Reason, 0) {
		out.Addf("reason", "at most %d bytes, no NUL", MaxReasonBytes)
	}
	if len(f.Selector) > MaxSelectorKeys {
		out.Addf("selector", "at most %d labels, got %d", MaxSelectorKeys, len(f.Selector))
	}
	for k, v := range f.Selector {
		if k == "" || len(k)+len(v) > MaxLabelBytes || strings.ContainsRune(k+v, 0) {
			out.Addf("selector", "label %.40q: keys must not be empty, key and value at most %d bytes together", k, MaxLabelBytes)
		}
	}
	if f.StartsAt != nil && f.EndsAt != nil && !f.StartsAt.Before(*f.EndsAt) {
		out.Add("ends_at", "must be after starts_at")
	}
	if f.Weekly != nil {
		out = append(out, weeklyProblems(*f.Weekly)...)
	}
	return out
}

// weeklyProblems returns every problem of a weekly window.
func weeklyProblems(w WeeklyWindow) domain.Problems {
	var out domain.Problems
	if len(w.Days) == 0 || len(w.Days) > 7 {
		out.Add("weekly.days", "between 1 and 7 of "+strings.Join(Days, ", "))
	}
	for i, d := range w.Days {
		if !slices.Contains(Days, d) {
			out.Addf(fmt.Sprintf("weekly.days[%d]", i), "must be one of %s, got %.20q", strings.Join(Days, ", "), d)
		}
	}
	if _, err := clock(w.From); err != nil {
		out.Add("weekly.from", err.Error())
	}
	if _, err := clock(w.To); err != nil {
		out.Add("weekly.to", err.Error())
	}
	if len(w.Timezone) > MaxTimezoneBytes {
		out.Addf("weekly.timezone", "at most %d bytes", MaxTimezoneBytes)
	} else if _, err := time.LoadLocation(w.Timezone); err != nil {
		out.Addf("weekly.timezone", "unknown time zone %q", w.Timezone)
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
	Weekly   *WeeklyWindow
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
func weeklyActive(w WeeklyWindow, now time.Time) bool {
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

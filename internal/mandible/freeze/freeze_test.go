package freeze_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/mandible/freeze"
)

func at(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	require.NoError(t, err)
	return v
}

// A weekly window that wraps past midnight holds from Friday 18:00 to Saturday
// 08:00 in its own time zone, and not outside.
func TestWeeklyWindowWrapsPastMidnight(t *testing.T) {
	t.Parallel()
	w := freeze.Window{Weekly: &freeze.WeeklyWindow{Days: []string{"fri"}, From: "18:00", To: "08:00", Timezone: "Europe/Paris"}}
	// 2026-12-04 is a Friday; Paris is UTC+1 in December.
	for s, want := range map[string]bool{
		"2026-12-04T16:59:00Z": false, // 17:59 Paris
		"2026-12-04T17:00:00Z": true,  // 18:00 Paris
		"2026-12-05T06:59:00Z": true,  // Saturday 07:59 Paris
		"2026-12-05T07:00:00Z": false, // Saturday 08:00 Paris
		"2026-12-03T20:00:00Z": false, // Thursday evening
	} {
		require.Equal(t, want, w.ActiveAt(at(t, s)), s)
	}
}

// Whole days: from equal to to lasts 24 hours from that time on each listed day.
func TestWeeklyWindowWholeDays(t *testing.T) {
	t.Parallel()
	w := freeze.Window{Weekly: &freeze.WeeklyWindow{Days: []string{"sat", "sun"}, From: "00:00", To: "00:00"}}
	require.False(t, w.ActiveAt(at(t, "2026-12-04T23:59:59Z")))
	require.True(t, w.ActiveAt(at(t, "2026-12-05T00:00:00Z")))
	require.True(t, w.ActiveAt(at(t, "2026-12-06T23:59:00Z")))
	require.False(t, w.ActiveAt(at(t, "2026-12-07T00:00:00Z")))
}

// Start and end bound the window, alone or around a weekly one.
func TestWindowBounds(t *testing.T) {
	t.Parallel()
	start, end := at(t, "2026-12-24T00:00:00Z"), at(t, "2026-12-27T00:00:00Z")
	w := freeze.Window{StartsAt: &start, EndsAt: &end}
	require.False(t, w.ActiveAt(start.Add(-time.Second)))
	require.True(t, w.ActiveAt(start))
	require.False(t, w.ActiveAt(end))
	w.Weekly = &freeze.WeeklyWindow{Days: []string{"sat"}, From: "00:00", To: "00:00"}
	require.False(t, w.ActiveAt(at(t, "2026-12-25T12:00:00Z")), "a Friday inside the bounds but outside the weekly window")
	require.True(t, w.ActiveAt(at(t, "2026-12-26T12:00:00Z")))
	require.True(t, freeze.Window{}.ActiveAt(time.Now()), "an open window always holds")
}

// Every bad field is named at once.
func TestProblemsNameEveryField(t *testing.T) {
	t.Parallel()
	start := at(t, "2026-12-24T00:00:00Z")
	got := freeze.Problems(freeze.Definition{Name: "bad name", StartsAt: &start, EndsAt: &start,
		Weekly: &freeze.WeeklyWindow{Days: []string{"someday"}, From: "25:00", To: "8:00", Timezone: "Mars/Olympus"}})
	fields := map[string]bool{}
	for _, p := range got {
		fields[p.Field] = true
	}
	for _, f := range []string{"name", "reason", "ends_at", "weekly.days[0]", "weekly.from", "weekly.to", "weekly.timezone"} {
		require.True(t, fields[f], "%s not named in %q", f, got)
	}
	require.Empty(t, freeze.Problems(freeze.Definition{Name: "weekend", Reason: "no weekend deploys",
		Weekly: &freeze.WeeklyWindow{Days: []string{"sat", "sun"}, From: "00:00", To: "00:00", Timezone: "UTC"}}))
}

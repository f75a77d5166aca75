package schema_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/schema"
)

func (w windowBundle) advanceIn(t *testing.T, win domain.StepWindow) domain.StepProgress {
	t.Helper()
	p, err := schema.AdvanceStepIn(w.ctx, w.pool, w.id, 0, win)
	require.NoError(t, err)
	return p
}

// A batch end lets only the targets before it start; the batch is done once they
// ended, and the step goes on with the next batch's end until every target ran.
func TestAdvanceStepInStartsOnlyTheBatchAndSaysWhenItEnded(t *testing.T) {
	t.Parallel()
	w := setupWindow(t, 5, 0, false)
	p := w.advanceIn(t, domain.StepWindow{BatchEnd: 2})
	require.Equal(t, domain.StepProgress{Total: 5, Enqueued: 2, Running: 2, Skipped: 3}, p)
	w.finish(t)
	p = w.advanceIn(t, domain.StepWindow{BatchEnd: 2})
	require.Equal(t, domain.StepProgress{Total: 5, Enqueued: 2, Succeeded: 2, Skipped: 3, BatchDone: true}, p)
	p = w.advanceIn(t, domain.StepWindow{BatchEnd: 5})
	require.Equal(t, domain.StepProgress{Total: 5, Enqueued: 5, Succeeded: 2, Running: 3}, p)
	w.finish(t)
	p = w.advanceIn(t, domain.StepWindow{BatchEnd: 5})
	require.Equal(t, domain.StepProgress{Total: 5, Enqueued: 5, Succeeded: 5, Done: true, Status: "succeeded"}, p)
	require.Equal(t, 5, w.touched(t), "every target was touched")
}

// With a failure room the step keeps starting targets after a failure, within the
// room, and stops once the failures pass it.
func TestAdvanceStepInStopsPastItsFailureRoom(t *testing.T) {
	t.Parallel()
	w := setupWindow(t, 6, 2, false)
	room := 1
	win := domain.StepWindow{FailureRoom: &room}
	w.advanceIn(t, win)
	w.finish(t, "web-00001")
	p := w.advanceIn(t, win)
	require.Equal(t, 4, p.Enqueued, "one failure is within the room: two more start")
	require.False(t, p.Done)
	w.finish(t, "web-00003")
	p = w.advanceIn(t, win)
	require.Equal(t, domain.StepProgress{Total: 6, Enqueued: 4, Succeeded: 2, Failed: 2, Skipped: 2, Done: true, Status: "failed",
		FailedTargets: p.FailedTargets}, p, "two failures pass the room: nothing more starts")
	require.Equal(t, 4, w.touched(t))
}

// A scope makes the step's targets the first few of the deployment's.
func TestAdvanceStepInKeepsToItsScope(t *testing.T) {
	t.Parallel()
	w := setupWindow(t, 5, 0, false)
	p := w.advanceIn(t, domain.StepWindow{Scope: 2})
	require.Equal(t, domain.StepProgress{Total: 2, Enqueued: 2, Running: 2}, p)
	w.finish(t)
	p = w.advanceIn(t, domain.StepWindow{Scope: 2})
	require.Equal(t, domain.StepProgress{Total: 2, Enqueued: 2, Succeeded: 2, Done: true, Status: "succeeded"}, p)
	var names []string
	rows, err := w.pool.Query(w.ctx, `SELECT t.name FROM pending_dispatch_requests p JOIN targets t ON t.id = p.target_id WHERE p.deployment_id = $1 ORDER BY t.name`, w.id)
	require.NoError(t, err)
	for rows.Next() {
		var n string
		require.NoError(t, rows.Scan(&n))
		names = append(names, n)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"web-00001", "web-00002"}, names)
}

func (w windowBundle) touched(t *testing.T) int {
	t.Helper()
	n, err := schema.TouchedTargets(w.ctx, w.pool, w.id, 1)
	require.NoError(t, err)
	return n
}

package analysis_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/internal/mandible/analysis"
	"github.com/mantis-deploy/mantis/schema"
)

func TestRunOnceAnalysesAFailedDeploymentCommand(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dep := b.deployment(t)
	step := 2
	ids := b.run(t, &dep, &step, failed("+ kubectl rollout status deploy/web\nbash: line 1: kubectl: command not found\n", 127))

	queued := b.analysis(t, ids[0])
	require.Equal(t, domain.AnalysisQueued, queued.Status, "StoreCommandResult queues the analysis")
	require.Empty(t, b.events(t))

	n, err := b.processor.RunOnce(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)

	a := b.analysis(t, ids[0])
	require.Equal(t, domain.AnalysisDone, a.Status)
	require.Equal(t, schema.AnalysisInternal, a.Source)
	require.Equal(t, analysis.CategoryCommandNotFound, a.Category)
	require.Equal(t, "command not found: kubectl", a.Summary)
	require.Contains(t, a.Suggestion, "Install kubectl")
	require.Equal(t, analysis.RefinedByRules, a.RefinedBy)
	require.Empty(t, a.Error)
	require.NotNil(t, a.FinishedAt)

	events := b.events(t)
	require.Len(t, events, 1)
	require.Equal(t, analysis.EventType, events[0].Type)
	require.Equal(t, &dep, events[0].DeploymentID)
	require.Equal(t, analysis.Event{
		DeploymentID: dep,
		StepPosition: &step,
		Target:       target,
		CommandID:    ids[0],
		Category:     analysis.CategoryCommandNotFound,
		Summary:      "command not found: kubectl",
		Suggestion:   a.Suggestion,
		RefinedBy:    analysis.RefinedByRules,
	}, events[0].Data)

	n, err = b.processor.RunOnce(b.ctx)
	require.NoError(t, err)
	require.Zero(t, n, "an analysis is done once")
	require.Len(t, b.events(t), 1)
}

func TestRunOnceUsesTheCommandsExitCodeAndTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dep := b.deployment(t)
	step := 0
	timedOut := failed("Waiting for lock on /var/lib/dpkg/lock-frontend...\n", -1)
	timedOut.TimedOut = true
	ids := b.run(t, &dep, &step,
		failed("migrating 120000 rows\n", 137),
		timedOut,
		failed("", 127),
	)
	n, err := b.processor.RunOnce(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 3, n)

	oom := b.analysis(t, ids[0])
	require.Equal(t, analysis.CategoryOutOfMemory, oom.Category, "exit code 137 comes from command_queue")
	slow := b.analysis(t, ids[1])
	require.Equal(t, analysis.CategoryTimeout, slow.Category)
	require.Equal(t, `command timed out; last output: "Waiting for lock on /var/lib/dpkg/lock-frontend..."`, slow.Summary)
	missing := b.analysis(t, ids[2])
	require.Equal(t, analysis.CategoryCommandNotFound, missing.Category)

	events := b.events(t)
	require.Len(t, events, 3)
	got := map[uuid.UUID]string{}
	for _, e := range events {
		got[e.Data.CommandID] = e.Data.Category
	}
	require.Equal(t, map[uuid.UUID]string{
		ids[0]: analysis.CategoryOutOfMemory,
		ids[1]: analysis.CategoryTimeout,
		ids[2]: analysis.CategoryCommandNotFound,
	}, got)
}

func TestRunOnceEmitsNoEventForCommandsOutsideADeployment(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.run(t, nil, nil, failed("cat: /etc/webapp/config.yml: No such file or directory", 1))
	n, err := b.processor.RunOnce(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	a := b.analysis(t, ids[0])
	require.Equal(t, domain.AnalysisDone, a.Status)
	require.Equal(t, "no such file or directory: /etc/webapp/config.yml", a.Summary)
	require.Empty(t, b.events(t))
}

func TestRunOnceFinishesExternalRequests(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res := analysis.Classify("Killed", 137, false)
	created, err := schema.InsertExternalAnalysis(b.ctx, b.pool, schema.NewExternalAnalysis{
		ExternalID: "ci-run-881", Input: "Killed", Category: res.Category, Summary: res.Summary, Suggestion: res.Suggestion,
	})
	require.NoError(t, err)
	require.True(t, created)

	n, err := b.processor.RunOnce(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	a, err := schema.AnalysisByExternalID(b.ctx, b.pool, "ci-run-881")
	require.NoError(t, err)
	require.Equal(t, domain.AnalysisDone, a.Status)
	require.Equal(t, schema.AnalysisExternal, a.Source)
	require.Equal(t, analysis.CategoryOutOfMemory, a.Category)
	require.Equal(t, res.Summary, a.Summary)
	require.Empty(t, b.events(t), "external requests belong to no deployment")
}

func TestRunOnceRecordsTheModelsSummary(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv, _, bodies := fakeModel(t, answer("The deploy user cannot write /srv/app/releases: it is owned by root."))
	b.processor.Refiner = &analysis.Refiner{URL: srv.URL + "/v1", Model: "small-model", Timeout: 5 * time.Second}
	dep := b.deployment(t)
	step := 1
	ids := b.run(t, &dep, &step, failed("mkdir: cannot create directory '/srv/app/releases/42': Permission denied", 1))

	n, err := b.processor.RunOnce(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Contains(t, (<-bodies).Messages[1].Content, "Permission denied", "the model sees the output")

	a := b.analysis(t, ids[0])
	require.Equal(t, analysis.CategoryPermissionDenied, a.Category)
	require.Equal(t, "The deploy user cannot write /srv/app/releases: it is owned by root.", a.Summary)
	require.Equal(t, "model:small-model", a.RefinedBy)
	require.Empty(t, a.Error)
	events := b.events(t)
	require.Len(t, events, 1)
	require.Equal(t, a.Summary, events[0].Data.Summary)
	require.Equal(t, "model:small-model", events[0].Data.RefinedBy)
}

func TestRunOnceKeepsTheRulesWhenTheModelFails(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv, _, _ := fakeModel(t, func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "overloaded", http.StatusServiceUnavailable)
	})
	b.processor.Refiner = &analysis.Refiner{URL: srv.URL, Model: "small-model"}
	dep := b.deployment(t)
	step := 0
	ids := b.run(t, &dep, &step, failed("curl: (6) Could not resolve host: artifacts.example.com", 6))

	n, err := b.processor.RunOnce(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	a := b.analysis(t, ids[0])
	require.Equal(t, domain.AnalysisDone, a.Status)
	require.Equal(t, "cannot resolve host: artifacts.example.com", a.Summary)
	require.Equal(t, analysis.RefinedByRules, a.RefinedBy)
	require.Contains(t, a.Error, "model refinement failed: endpoint answered 503 Service Unavailable")
	require.Len(t, b.events(t), 1)
}

// Two processors on one table analyse every row exactly once between them.
func TestConcurrentProcessorsAnalyseEachRowOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dep := b.deployment(t)
	step := 0
	results := make([]schema.CommandResult, 40)
	for i := range results {
		results[i] = failed("No space left on device", 1)
	}
	ids := b.run(t, &dep, &step, results...)

	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total int
	)
	for range 2 {
		p := &analysis.Processor{DB: b.pool, Logger: b.processor.Logger, BatchSize: 3}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n, err := p.RunOnce(b.ctx)
				if err != nil || n == 0 {
					return
				}
				mu.Lock()
				total += n
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	// A processor that found every queued row locked by the other stops early: drain.
	for {
		n, err := b.processor.RunOnce(b.ctx)
		require.NoError(t, err)
		if n == 0 {
			break
		}
		total += n
	}
	require.Equal(t, len(ids), total)
	events := b.events(t)
	require.Len(t, events, len(ids))
	seen := map[uuid.UUID]bool{}
	for _, e := range events {
		require.False(t, seen[e.Data.CommandID], "one event per command")
		seen[e.Data.CommandID] = true
	}
}

func TestRunPicksUpNewFailuresAndStopsWithItsContext(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithCancel(b.ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- b.processor.Run(ctx, 50*time.Millisecond) }()

	dep := b.deployment(t)
	step := 0
	ids := b.run(t, &dep, &step, failed("ssh: connect to host 10.20.0.7 port 22: No route to host", 255))
	require.Eventually(t, func() bool {
		a, err := schema.AnalysisByCommandID(b.ctx, b.pool, ids[0])
		return err == nil && a.Status == domain.AnalysisDone
	}, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, "no route to host: 10.20.0.7:22", b.analysis(t, ids[0]).Summary)

	cancel()
	select {
	case err := <-stopped:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop when its context ended")
	}
}

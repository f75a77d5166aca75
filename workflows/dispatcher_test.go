package workflows

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/mantis-deploy/mantis/activities"
	"github.com/mantis-deploy/mantis/internal/contract/activityio"
	"github.com/mantis-deploy/mantis/internal/domain"
)

// Activity type names as the workflow schedules them.
const (
	maintainActivity = "MaintainDispatchQueue"
	claimActivity    = "ClaimBatch"
	deliverActivity  = "DeliverBatch"
)

// testStart is the workflow clock at the start of every test run.
var testStart = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// scheduled is one activity the workflow scheduled, as seen by the outbound interceptor.
type scheduled struct {
	Activity string
	// At is workflow time since testStart.
	At      time.Duration
	Options workflow.ActivityOptions
	// Local marks a local activity, scheduled with LocalOptions.
	Local        bool
	LocalOptions workflow.LocalActivityOptions
	Input        any
}

// scheduleRecorder records every activity the workflow schedules, in order, with the
// workflow time and the options it was scheduled with.
type scheduleRecorder struct {
	interceptor.WorkerInterceptorBase
	mu    sync.Mutex
	calls []scheduled
}

func (r *scheduleRecorder) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	in := &recordingInbound{rec: r}
	in.Next = next
	return in
}

func (r *scheduleRecorder) add(s scheduled) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, s)
}

// all returns every recorded activity.
func (r *scheduleRecorder) all() []scheduled {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// of returns the recorded activities of one type.
func (r *scheduleRecorder) of(activity string) []scheduled {
	var out []scheduled
	for _, s := range r.all() {
		if s.Activity == activity {
			out = append(out, s)
		}
	}
	return out
}

// times returns when each activity of one type was scheduled.
func (r *scheduleRecorder) times(activity string) []time.Duration {
	var out []time.Duration
	for _, s := range r.of(activity) {
		out = append(out, s.At)
	}
	return out
}

// sequence returns the activity types in the order they were scheduled.
func (r *scheduleRecorder) sequence() []string {
	var out []string
	for _, s := range r.all() {
		out = append(out, s.Activity)
	}
	return out
}

type recordingInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	rec *scheduleRecorder
}

func (i *recordingInbound) Init(outbound interceptor.WorkflowOutboundInterceptor) error {
	out := &recordingOutbound{rec: i.rec}
	out.Next = outbound
	return i.Next.Init(out)
}

type recordingOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	rec *scheduleRecorder
}

func (o *recordingOutbound) ExecuteActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	s := scheduled{Activity: activityType, At: workflow.Now(ctx).Sub(testStart), Options: workflow.GetActivityOptions(ctx)}
	if len(args) == 1 {
		s.Input = args[0]
	}
	o.rec.add(s)
	return o.Next.ExecuteActivity(ctx, activityType, args...)
}

func (o *recordingOutbound) ExecuteLocalActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	s := scheduled{Activity: activityType, At: workflow.Now(ctx).Sub(testStart), Local: true, LocalOptions: workflow.GetLocalActivityOptions(ctx)}
	if len(args) == 1 {
		s.Input = args[0]
	}
	o.rec.add(s)
	return o.Next.ExecuteLocalActivity(ctx, activityType, args...)
}

// logged is one log record, with its attributes flattened.
type logged struct {
	Level   slog.Level
	Message string
	Attrs   map[string]any
}

// logRecorder is a slog handler keeping every record, so tests can check what the
// workflow and the SDK logged.
type logRecorder struct {
	mu      *sync.Mutex
	records *[]logged
	attrs   []slog.Attr
}

func newLogRecorder() *logRecorder {
	return &logRecorder{mu: &sync.Mutex{}, records: &[]logged{}}
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	rec := logged{Level: r.Level, Message: r.Message, Attrs: map[string]any{}}
	for _, a := range h.attrs {
		rec.Attrs[a.Key] = a.Value.Any()
	}
	r.Attrs(func(a slog.Attr) bool {
		rec.Attrs[a.Key] = a.Value.Any()
		return true
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	*h.records = append(*h.records, rec)
	return nil
}

func (h *logRecorder) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &logRecorder{mu: h.mu, records: h.records, attrs: append(slices.Clone(h.attrs), attrs...)}
}

func (h *logRecorder) WithGroup(string) slog.Handler { return h }

// find returns the records with message msg.
func (h *logRecorder) find(msg string) []logged {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []logged
	for _, r := range *h.records {
		if r.Message == msg {
			out = append(out, r)
		}
	}
	return out
}

// dispatcherTest is what a dispatcher test needs: the environment, the recorder, and
// the behaviour of the mocked activities, which a test may replace before it runs the
// workflow.
type dispatcherTest struct {
	env  *testsuite.TestWorkflowEnvironment
	rec  *scheduleRecorder
	logs *logRecorder

	maintain func(n int) (activityio.MaintainDispatchQueueResult, error)
	// claim answers the nth claim (from 0); by default it returns claims[n], then nothing.
	claim   func(n int) (activityio.ClaimBatchResult, error)
	claims  [][]domain.ClaimedRequest
	deliver func(n int, in activityio.DeliverBatchInput) (activityio.DeliverBatchResult, error)
}

func setup(t *testing.T) *dispatcherTest {
	t.Helper()
	logs := newLogRecorder()
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(logs)))
	env := suite.NewTestWorkflowEnvironment()
	env.SetStartTime(testStart)
	rec := &scheduleRecorder{}
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{rec}})
	env.RegisterWorkflowWithOptions(Dispatcher, workflow.RegisterOptions{Name: DispatcherWorkflowType})
	env.RegisterActivity(&activities.Activities{})

	dt := &dispatcherTest{env: env, rec: rec, logs: logs}
	dt.maintain = func(int) (activityio.MaintainDispatchQueueResult, error) {
		return activityio.MaintainDispatchQueueResult{}, nil
	}
	dt.claim = func(n int) (activityio.ClaimBatchResult, error) {
		if n < len(dt.claims) {
			return activityio.ClaimBatchResult{Claimed: dt.claims[n]}, nil
		}
		return activityio.ClaimBatchResult{}, nil
	}
	dt.deliver = func(_ int, in activityio.DeliverBatchInput) (activityio.DeliverBatchResult, error) {
		return activityio.DeliverBatchResult{Dispatched: len(in.Requests)}, nil
	}

	var mu sync.Mutex
	calls := map[string]int{}
	next := func(activity string) int {
		mu.Lock()
		defer mu.Unlock()
		n := calls[activity]
		calls[activity]++
		return n
	}
	var a *activities.Activities
	env.OnActivity(a.MaintainDispatchQueue, mock.Anything, mock.Anything).Return(
		func(context.Context, activityio.MaintainDispatchQueueInput) (activityio.MaintainDispatchQueueResult, error) {
			return dt.maintain(next(maintainActivity))
		})
	env.OnActivity(a.ClaimBatch, mock.Anything, mock.Anything).Return(
		func(context.Context, activityio.ClaimBatchInput) (activityio.ClaimBatchResult, error) {
			return dt.claim(next(claimActivity))
		})
	env.OnActivity(a.DeliverBatch, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activityio.DeliverBatchInput) (activityio.DeliverBatchResult, error) {
			return dt.deliver(next(deliverActivity), in)
		})
	return dt
}

// run runs the dispatcher to completion.
func (dt *dispatcherTest) run(in DispatcherInput) error {
	dt.env.ExecuteWorkflow(DispatcherWorkflowType, in)
	if !dt.env.IsWorkflowCompleted() {
		return errors.New("dispatcher did not complete")
	}
	return dt.env.GetWorkflowError()
}

// input is a valid dispatcher input that continues as new after rounds rounds.
func input(rounds int) DispatcherInput {
	return DispatcherInput{
		ReplicaID:         "mandible-a",
		PollInterval:      30 * time.Second,
		BatchSize:         10,
		ProcessingTimeout: 300 * time.Second,
		RoundsPerRun:      rounds,
	}
}

// requests returns n claimed requests with distinct ids and epochs; seed keeps batches
// of one test apart.
func requests(seed, n int) []domain.ClaimedRequest {
	out := make([]domain.ClaimedRequest, n)
	for i := range out {
		out[i] = domain.ClaimedRequest{
			ID:       uuid.MustParse(fmt.Sprintf("%08d-0000-4000-8000-%012d", seed, i+1)),
			Epoch:    int64(seed*100 + i + 1),
			Target:   fmt.Sprintf("target-%d", i+1),
			Priority: "normal",
		}
	}
	return out
}

func refs(claimed []domain.ClaimedRequest) []domain.ClaimRef {
	out := make([]domain.ClaimRef, len(claimed))
	for i, c := range claimed {
		out[i] = domain.ClaimRef{ID: c.ID, Epoch: c.Epoch}
	}
	return out
}

func requireContinuedAsNew(t *testing.T, err error) {
	t.Helper()
	require.Error(t, err)
	require.True(t, workflow.IsContinueAsNewError(err), "want continue-as-new, got %v", err)
}

func TestDispatcherRoundDeliversPartialBatchThenWaits(t *testing.T) {
	t.Parallel()
	dt := setup(t)
	batch := requests(1, 3)
	dt.claims = [][]domain.ClaimedRequest{batch}
	in := input(2)

	requireContinuedAsNew(t, dt.run(in))

	require.Equal(t, []string{
		maintainActivity, claimActivity, deliverActivity, // round 1
		maintainActivity, claimActivity, // round 2, on the tick; nothing to deliver
	}, dt.rec.sequence())

	all := dt.rec.all()
	require.Equal(t, activityio.MaintainDispatchQueueInput{ReplicaID: in.ReplicaID}, all[0].Input)
	require.Equal(t, activityio.ClaimBatchInput{ReplicaID: in.ReplicaID, Limit: in.BatchSize}, all[1].Input)
	require.Equal(t, activityio.DeliverBatchInput{ReplicaID: in.ReplicaID, Requests: refs(batch)}, all[2].Input)
	require.Equal(t, time.Duration(0), all[2].At, "the batch is delivered in the round that claimed it")

	// A partial batch means the queue is drained: the next claim waits for the tick.
	require.Equal(t, []time.Duration{0, in.PollInterval}, dt.rec.times(claimActivity))
}

func TestDispatcherFullBatchClaimsAgainAtOnce(t *testing.T) {
	t.Parallel()
	dt := setup(t)
	in := input(4)
	in.BatchSize = 2
	dt.claims = [][]domain.ClaimedRequest{requests(1, 2), requests(2, 2), requests(3, 1)}

	requireContinuedAsNew(t, dt.run(in))

	// Two full batches, then a partial one, all before any timer fired; the fourth claim
	// waits for the tick.
	require.Equal(t, []time.Duration{0, 0, 0, in.PollInterval}, dt.rec.times(claimActivity))
	var delivered [][]domain.ClaimRef
	for _, s := range dt.rec.of(deliverActivity) {
		delivered = append(delivered, s.Input.(activityio.DeliverBatchInput).Requests)
		require.Equal(t, time.Duration(0), s.At)
	}
	require.Equal(t, [][]domain.ClaimRef{refs(dt.claims[0]), refs(dt.claims[1]), refs(dt.claims[2])}, delivered)
	// Back-to-back rounds within the interval do not repeat the maintenance.
	require.Equal(t, []time.Duration{0, in.PollInterval}, dt.rec.times(maintainActivity))
}

func TestDispatcherTickClaimsAndMaintainsEveryPollInterval(t *testing.T) {
	t.Parallel()
	dt := setup(t)
	in := input(3)

	requireContinuedAsNew(t, dt.run(in))

	ticks := []time.Duration{0, 30 * time.Second, 60 * time.Second}
	require.Equal(t, ticks, dt.rec.times(claimActivity))
	require.Equal(t, ticks, dt.rec.times(maintainActivity))
	require.Equal(t, []string{
		maintainActivity, claimActivity,
		maintainActivity, claimActivity,
		maintainActivity, claimActivity,
	}, dt.rec.sequence())
	// The last round waits out its interval before the run continues as new.
	require.Equal(t, 90*time.Second, dt.env.Now().Sub(testStart))
}

func TestDispatcherWakeRoundsSkipMaintenanceWithinInterval(t *testing.T) {
	t.Parallel()
	dt := setup(t)
	in := input(4)
	dt.env.RegisterDelayedCallback(func() { dt.env.SignalWorkflow(WakeSignal, nil) }, 5*time.Second)
	dt.env.RegisterDelayedCallback(func() { dt.env.SignalWorkflow(WakeSignal, nil) }, 12*time.Second)

	requireContinuedAsNew(t, dt.run(in))

	// The wake-ups move claims forward but not the tick: it still fires 30 s after the
	// last maintenance, and only tick rounds maintain.
	require.Equal(t, []time.Duration{0, 5 * time.Second, 12 * time.Second, 30 * time.Second}, dt.rec.times(claimActivity))
	require.Equal(t, []time.Duration{0, 30 * time.Second}, dt.rec.times(maintainActivity))
}

func TestDispatcherWakeSignalClaimsBeforeTick(t *testing.T) {
	t.Parallel()
	dt := setup(t)
	in := input(2)
	batch := requests(1, 1)
	dt.claims = [][]domain.ClaimedRequest{nil, batch}
	dt.env.RegisterDelayedCallback(func() { dt.env.SignalWorkflow(WakeSignal, nil) }, 5*time.Second)

	requireContinuedAsNew(t, dt.run(in))

	require.Equal(t, []time.Duration{0, 5 * time.Second}, dt.rec.times(claimActivity))
	deliveries := dt.rec.of(deliverActivity)
	require.Len(t, deliveries, 1)
	require.Equal(t, 5*time.Second, deliveries[0].At)
	require.Equal(t, refs(batch), deliveries[0].Input.(activityio.DeliverBatchInput).Requests)
}

func TestDispatcherCoalescesWakeSignals(t *testing.T) {
	t.Parallel()

	t.Run("sent together while waiting", func(t *testing.T) {
		t.Parallel()
		dt := setup(t)
		in := input(3)
		dt.env.RegisterDelayedCallback(func() {
			// Three signals in one workflow task, as the server delivers a burst.
			dt.env.SignalWorkflowSkippingWorkflowTask(WakeSignal, nil)
			dt.env.SignalWorkflowSkippingWorkflowTask(WakeSignal, nil)
			dt.env.SignalWorkflow(WakeSignal, nil)
		}, 5*time.Second)

		requireContinuedAsNew(t, dt.run(in))

		require.Equal(t, []time.Duration{0, 5 * time.Second, 30 * time.Second}, dt.rec.times(claimActivity))
	})

	t.Run("sent during a round", func(t *testing.T) {
		t.Parallel()
		dt := setup(t)
		in := input(3)
		// New requests arrive while the first claim runs: the round after it must look
		// again (once), since the claim may have missed them.
		dt.claim = func(n int) (activityio.ClaimBatchResult, error) {
			if n == 0 {
				for range 3 {
					dt.env.SignalWorkflow(WakeSignal, nil)
				}
			}
			return activityio.ClaimBatchResult{}, nil
		}

		requireContinuedAsNew(t, dt.run(in))

		require.Equal(t, []time.Duration{0, 0, 30 * time.Second}, dt.rec.times(claimActivity))
	})
}

func TestDispatcherContinuesAsNewWithSameInput(t *testing.T) {
	t.Parallel()

	t.Run("after RoundsPerRun rounds", func(t *testing.T) {
		t.Parallel()
		dt := setup(t)
		in := input(3)
		in.ProcessingTimeout = 0 // carried unchanged, not replaced by the default

		err := dt.run(in)

		var canErr *workflow.ContinueAsNewError
		require.ErrorAs(t, err, &canErr)
		require.Equal(t, DispatcherWorkflowType, canErr.WorkflowType.Name)
		var next DispatcherInput
		require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(canErr.Input, &next))
		require.Equal(t, in, next)
		require.Len(t, dt.rec.of(claimActivity), 3)
	})

	t.Run("after 200 rounds by default", func(t *testing.T) {
		t.Parallel()
		dt := setup(t)
		in := input(0)
		in.BatchSize = 1
		full := requests(1, 1)
		dt.claim = func(int) (activityio.ClaimBatchResult, error) {
			return activityio.ClaimBatchResult{Claimed: full}, nil
		}

		requireContinuedAsNew(t, dt.run(in))

		require.Len(t, dt.rec.of(claimActivity), 200)
	})
}

func TestDispatcherDrainsWakeSignalsBeforeContinueAsNew(t *testing.T) {
	t.Parallel()
	dt := setup(t)
	in := input(1)
	in.BatchSize = 1
	// The last round claims a full batch, so the run ends without waiting, with the
	// wake-ups sent during the claim still buffered. The next run claims at once anyway.
	dt.claim = func(int) (activityio.ClaimBatchResult, error) {
		dt.env.SignalWorkflow(WakeSignal, nil)
		dt.env.SignalWorkflow(WakeSignal, nil)
		return activityio.ClaimBatchResult{Claimed: requests(1, 1)}, nil
	}

	requireContinuedAsNew(t, dt.run(in))

	require.Len(t, dt.rec.of(claimActivity), 1)
	require.Empty(t, dt.logs.find("Workflow has unhandled signals"))
}

func TestDispatcherEmptyClaimDeliversNothing(t *testing.T) {
	t.Parallel()
	dt := setup(t)

	requireContinuedAsNew(t, dt.run(input(2)))

	require.Len(t, dt.rec.of(claimActivity), 2)
	require.Empty(t, dt.rec.of(deliverActivity))
}

func TestDispatcherCarriesOnAfterDeliveryFailure(t *testing.T) {
	t.Parallel()
	dt := setup(t)
	in := input(2)
	dt.claims = [][]domain.ClaimedRequest{requests(1, 2), requests(2, 1)}
	var mu sync.Mutex
	attempts := 0 // attempts on the first batch
	dt.deliver = func(_ int, req activityio.DeliverBatchInput) (activityio.DeliverBatchResult, error) {
		mu.Lock()
		defer mu.Unlock()
		if req.Requests[0].ID == dt.claims[0][0].ID {
			attempts++
		}
		return activityio.DeliverBatchResult{}, errors.New("writing command_queue: connection refused")
	}

	requireContinuedAsNew(t, dt.run(in))

	// The local delivery is retried a few times, then given up (the rows stay in
	// processing for maintenance to reclaim); the loop goes on, claims on the tick and
	// delivers the next batch.
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, localAttempts, attempts, "a failed delivery is retried a few times")
	require.Len(t, dt.rec.of(claimActivity), 2)
	deliveries := dt.rec.of(deliverActivity)
	require.Len(t, deliveries, 2)
	require.Equal(t, refs(dt.claims[1]), deliveries[1].Input.(activityio.DeliverBatchInput).Requests)
	failures := dt.logs.find("delivering claimed batch failed")
	require.Len(t, failures, 2)
	require.Equal(t, slog.LevelError, failures[0].Level)
	require.EqualValues(t, 2, failures[0].Attrs["requests"])
}

func TestDispatcherCarriesOnAfterMaintenanceFailure(t *testing.T) {
	t.Parallel()
	dt := setup(t)
	dt.maintain = func(int) (activityio.MaintainDispatchQueueResult, error) {
		return activityio.MaintainDispatchQueueResult{}, temporal.NewNonRetryableApplicationError("maintenance refused", activityio.InvalidInput, nil)
	}
	dt.claims = [][]domain.ClaimedRequest{requests(1, 1)}

	requireContinuedAsNew(t, dt.run(input(2)))

	require.Equal(t, []time.Duration{0, 30 * time.Second}, dt.rec.times(claimActivity))
	require.Len(t, dt.rec.of(deliverActivity), 1)
	require.Len(t, dt.logs.find("dispatch maintenance failed"), 2)
}

func TestDispatcherRejectsInvalidInput(t *testing.T) {
	t.Parallel()
	for name, mutate := range map[string]func(*DispatcherInput){
		"empty replica id":       func(in *DispatcherInput) { in.ReplicaID = "" },
		"zero batch size":        func(in *DispatcherInput) { in.BatchSize = 0 },
		"negative batch size":    func(in *DispatcherInput) { in.BatchSize = -1 },
		"zero poll interval":     func(in *DispatcherInput) { in.PollInterval = 0 },
		"negative poll interval": func(in *DispatcherInput) { in.PollInterval = -time.Second },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dt := setup(t)
			in := input(2)
			mutate(&in)

			err := dt.run(in)

			var appErr *temporal.ApplicationError
			require.ErrorAs(t, err, &appErr)
			require.Equal(t, activityio.InvalidInput, appErr.Type())
			require.True(t, appErr.NonRetryable())
			require.Empty(t, dt.rec.all(), "nothing is scheduled for invalid input")
		})
	}
}

func TestDispatcherCancelledWhileWaiting(t *testing.T) {
	t.Parallel()
	dt := setup(t)
	dt.env.RegisterDelayedCallback(dt.env.CancelWorkflow, 10*time.Second)

	err := dt.run(input(5))

	require.Error(t, err)
	require.True(t, temporal.IsCanceledError(err), "want cancelled, got %v", err)
	require.False(t, workflow.IsContinueAsNewError(err))
	var appErr *temporal.ApplicationError
	require.False(t, errors.As(err, &appErr), "cancellation is not a failure: %v", err)
	// The wait ends with the cancellation, not at the tick.
	require.Equal(t, 10*time.Second, dt.env.Now().Sub(testStart))
	require.Len(t, dt.rec.of(claimActivity), 1)
}

func TestDispatcherActivityOptions(t *testing.T) {
	t.Parallel()

	t.Run("summaries and deadlines", func(t *testing.T) {
		t.Parallel()
		dt := setup(t)
		in := input(1)
		in.ProcessingTimeout = 2 * time.Minute
		batch := requests(1, 5)
		dt.claims = [][]domain.ClaimedRequest{batch}

		requireContinuedAsNew(t, dt.run(in))

		all := dt.rec.all()
		require.Len(t, all, 3)
		maintain, claim, deliver := all[0], all[1], all[2]
		// Maintenance stays a regular activity; the claim and the delivery run in the
		// workflow task as local activities, with a few short attempts.
		require.False(t, maintain.Local)
		require.Positive(t, maintain.Options.StartToCloseTimeout)
		require.Contains(t, maintain.Options.RetryPolicy.NonRetryableErrorTypes, activityio.InvalidInput)
		require.NotEmpty(t, maintain.Options.Summary)
		// Failing maintenance gives up after a few attempts instead of holding up claims.
		require.Equal(t, int32(3), maintain.Options.RetryPolicy.MaximumAttempts)
		for _, s := range []scheduled{claim, deliver} {
			require.True(t, s.Local, s.Activity)
			o := s.LocalOptions
			require.Positive(t, o.StartToCloseTimeout, s.Activity)
			require.NotNil(t, o.RetryPolicy, s.Activity)
			require.Contains(t, o.RetryPolicy.NonRetryableErrorTypes, activityio.InvalidInput, s.Activity)
			require.Equal(t, int32(localAttempts), o.RetryPolicy.MaximumAttempts, s.Activity)
			// Retries stay within the workflow task, under the same activity id.
			require.Less(t, o.RetryPolicy.MaximumInterval, 10*time.Second, s.Activity)
		}
		require.Equal(t, "claim up to 10 pending requests for replica mandible-a", claim.LocalOptions.Summary)
		require.Equal(t, deliverSummary(batch), deliver.LocalOptions.Summary)
		// A delivery outliving the processing timeout would only be refused as stale.
		require.Equal(t, in.ProcessingTimeout, deliver.LocalOptions.ScheduleToCloseTimeout)
	})

	t.Run("default processing timeout", func(t *testing.T) {
		t.Parallel()
		dt := setup(t)
		in := input(1)
		in.ProcessingTimeout = 0
		dt.claims = [][]domain.ClaimedRequest{requests(1, 1)}

		requireContinuedAsNew(t, dt.run(in))

		deliveries := dt.rec.of(deliverActivity)
		require.Len(t, deliveries, 1)
		require.Equal(t, 300*time.Second, deliveries[0].LocalOptions.ScheduleToCloseTimeout)
	})
}

func TestDeliverSummary(t *testing.T) {
	t.Parallel()
	batch := requests(7, 5)
	ids := make([]string, len(batch))
	for i, c := range batch {
		ids[i] = c.ID.String()
	}
	for _, tc := range []struct {
		n    int
		want string
	}{
		{1, "deliver 1 requests: " + ids[0]},
		{3, fmt.Sprintf("deliver 3 requests: %s, %s, %s", ids[0], ids[1], ids[2])},
		{4, fmt.Sprintf("deliver 4 requests: %s, %s, %s +1 more", ids[0], ids[1], ids[2])},
		{5, fmt.Sprintf("deliver 5 requests: %s, %s, %s +2 more", ids[0], ids[1], ids[2])},
	} {
		require.Equal(t, tc.want, deliverSummary(batch[:tc.n]), "n=%d", tc.n)
	}
}

package thorax

import (
	"bytes"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/mantis-deploy/mantis/internal/devcerts"
	"github.com/mantis-deploy/mantis/internal/tlsconf"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

func poll(target string, maxCommands int32, wait time.Duration) *mantisv1.PollCommandsRequest {
	return &mantisv1.PollCommandsRequest{Target: target, MaxCommands: maxCommands, Wait: durationpb.New(wait)}
}

func TestRegistersUntilMandibleAnswersAndHeartbeatsWithIssuedID(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.mandible.failRegistrations = 2
	th := f.start(t)

	require.Equal(t, instanceID(1), th.InstanceID())
	require.Zero(t, f.mandible.failRegistrations, "both refusals were retried")

	// A poll makes its target connected: heartbeats report it and fetches
	// claim for it, under the issued id.
	_, err := f.pollClient(t, th).PollCommands(t.Context(), poll("web-poll", 1, 0))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		for _, hb := range f.mandible.heartbeatList() {
			if hb.GetInstanceId() == instanceID(1) && slices.Equal(hb.GetPollTargets(), []string{"web-poll"}) && !hb.GetDraining() {
				return true
			}
		}
		return false
	}, waitFor, 10*time.Millisecond)
	require.Eventually(t, func() bool {
		for _, fe := range f.mandible.fetchList() {
			if fe.GetInstanceId() == instanceID(1) && slices.Equal(fe.GetPollTargets(), []string{"web-poll"}) {
				require.EqualValues(t, f.cfg.Polling.MaxHeldCommands, fe.GetMaxCommands(), "an empty instance asks for its whole capacity")
				return true
			}
		}
		return false
	}, waitFor, 10*time.Millisecond)
}

func TestListenCommandRunsOnAgentAndResultIsStoredWithItsLease(t *testing.T) {
	t.Parallel()
	f := setup(t)
	agent := &fakeAgent{}
	agentAddr := f.startAgent(t, agent)
	f.mandible.queue(listenCommand("cmd-listen", agentAddr, 7))
	th := f.start(t)

	call := receive(t, agent.calls)
	require.Equal(t, commandID("cmd-listen"), call.cmd.GetId())
	require.Equal(t, "echo cmd-listen", call.cmd.GetCommand())
	require.Equal(t, "thorax", call.commonName, "thorax presents its own certificate to the agent")

	stored := receive(t, f.mandible.stored)
	require.Equal(t, instanceID(1), stored.GetInstanceId())
	require.Equal(t, commandID("cmd-listen"), stored.GetCommandId())
	require.EqualValues(t, 7, stored.GetLeaseEpoch())
	require.Equal(t, "ran echo cmd-listen", string(stored.GetResult().GetOutput()))
	require.Eventually(t, func() bool { return len(th.book.remaining()) == 0 }, waitFor, 10*time.Millisecond)
}

func TestOutputBeyondMandiblesLimitKeepsItsTail(t *testing.T) {
	t.Parallel()
	f := setup(t)
	output := append(bytes.Repeat([]byte("x"), maxResultOutput), []byte("the end")...)
	agentAddr := f.startAgent(t, &fakeAgent{output: output})
	f.mandible.queue(listenCommand("cmd-chatty", agentAddr, 1))
	f.start(t)

	stored := receive(t, f.mandible.stored)
	require.Len(t, stored.GetResult().GetOutput(), maxResultOutput)
	require.True(t, bytes.HasSuffix(stored.GetResult().GetOutput(), []byte("the end")))
	require.True(t, stored.GetResult().GetOutputTruncated())
}

func TestPollCommandIsLongPolledAndItsReportedResultStored(t *testing.T) {
	t.Parallel()
	f := setup(t)
	th := f.start(t)
	client := f.pollClient(t, th)

	type answer struct {
		resp *mantisv1.PollCommandsResponse
		err  error
	}
	polled := make(chan answer, 1)
	go func() {
		resp, err := client.PollCommands(t.Context(), poll("web-poll", 5, 50*time.Second))
		polled <- answer{resp, err}
	}()
	// Only once the waiting agent makes its target part of the claims does the
	// command become claimable: the answer comes from the wake-up, not the wait.
	f.mandible.waitFetchFor(t, "web-poll")
	f.mandible.queue(pollCommand("cmd-poll", "web-poll", 3))

	got := receive(t, polled)
	require.NoError(t, got.err)
	require.Len(t, got.resp.GetCommands(), 1)
	require.Equal(t, commandID("cmd-poll"), got.resp.GetCommands()[0].GetId())

	// Another target's agent may not report it.
	_, err := f.pollClientFor(t, th, "db-poll").ReportResult(t.Context(), &mantisv1.ReportResultRequest{
		Target: "db-poll", CommandId: commandID("cmd-poll"), Result: &mantisv1.CommandResult{ExitCode: 0},
	})
	require.Equal(t, codes.FailedPrecondition, status.Code(err), "%v", err)

	_, err = client.ReportResult(t.Context(), &mantisv1.ReportResultRequest{
		Target: "web-poll", CommandId: commandID("cmd-poll"), Result: &mantisv1.CommandResult{ExitCode: 2, Output: []byte("boom")},
	})
	require.NoError(t, err)
	stored := receive(t, f.mandible.stored)
	require.Equal(t, instanceID(1), stored.GetInstanceId())
	require.Equal(t, commandID("cmd-poll"), stored.GetCommandId())
	require.EqualValues(t, 3, stored.GetLeaseEpoch())
	require.EqualValues(t, 2, stored.GetResult().GetExitCode())
	require.Equal(t, "boom", string(stored.GetResult().GetOutput()))

	// Once stored, the command is no longer held.
	_, err = client.ReportResult(t.Context(), &mantisv1.ReportResultRequest{
		Target: "web-poll", CommandId: commandID("cmd-poll"), Result: &mantisv1.CommandResult{},
	})
	require.Equal(t, codes.NotFound, status.Code(err), "%v", err)
	_, err = client.ReportResult(t.Context(), &mantisv1.ReportResultRequest{
		Target: "web-poll", CommandId: commandID("never-claimed"), Result: &mantisv1.CommandResult{},
	})
	require.Equal(t, codes.NotFound, status.Code(err), "%v", err)
}

func TestMalformedAgentCallsNameTheField(t *testing.T) {
	t.Parallel()
	f := setup(t)
	th := f.start(t)
	client := f.pollClient(t, th)

	for _, tc := range []struct {
		req   *mantisv1.PollCommandsRequest
		field string
	}{
		{poll("", 1, 0), "target"},
		{poll("-web", 1, 0), "target"},
		{poll("web-poll", 0, 0), "max_commands"},
		{poll("web-poll", 101, 0), "max_commands"},
		{poll("web-poll", 1, -time.Second), "wait"},
	} {
		_, err := client.PollCommands(t.Context(), tc.req)
		require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
		require.Contains(t, status.Convert(err).Message(), tc.field+":")
	}
	for _, tc := range []struct {
		req   *mantisv1.ReportResultRequest
		field string
	}{
		{&mantisv1.ReportResultRequest{CommandId: commandID("c"), Result: &mantisv1.CommandResult{}}, "target"},
		{&mantisv1.ReportResultRequest{Target: "web poll", CommandId: commandID("c"), Result: &mantisv1.CommandResult{}}, "target"},
		{&mantisv1.ReportResultRequest{Target: "web-poll", Result: &mantisv1.CommandResult{}}, "command_id"},
		{&mantisv1.ReportResultRequest{Target: "web-poll", CommandId: "c", Result: &mantisv1.CommandResult{}}, "command_id"},
		{&mantisv1.ReportResultRequest{Target: "web-poll", CommandId: commandID("c")}, "result"},
	} {
		_, err := client.ReportResult(t.Context(), tc.req)
		require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
		require.Contains(t, status.Convert(err).Message(), tc.field+":")
	}
}

func TestFailedListenHandOffAsksMandibleForAnotherDispatch(t *testing.T) {
	t.Parallel()
	f := setup(t)
	// An address nothing listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	deadAddr := ln.Addr().String()
	require.NoError(t, ln.Close())
	busy := &fakeAgent{fail: status.Error(codes.ResourceExhausted, "4 commands running")}
	busyAddr := f.startAgent(t, busy)
	f.mandible.redispatchAnswer = &mantisv1.ScheduleRedispatchResponse{Scheduled: false, Refusal: "the retry budget is spent (10 retries after the first delivery, 11 deliveries in all); the request failed"}
	f.mandible.queue(listenCommand("cmd-unreachable", deadAddr, 4), listenCommand("cmd-busy", busyAddr, 5))
	th := f.start(t)

	got := map[string]*mantisv1.ScheduleRedispatchRequest{}
	for range 2 {
		r := receive(t, f.mandible.redispatches)
		got[r.GetCommandId()] = r
	}
	require.Equal(t, instanceID(1), got[commandID("cmd-unreachable")].GetInstanceId())
	require.EqualValues(t, 4, got[commandID("cmd-unreachable")].GetLeaseEpoch())
	require.Contains(t, got[commandID("cmd-unreachable")].GetReason(), deadAddr)
	require.Contains(t, got[commandID("cmd-unreachable")].GetReason(), codes.Unavailable.String())
	require.EqualValues(t, 5, got[commandID("cmd-busy")].GetLeaseEpoch())
	require.Contains(t, got[commandID("cmd-busy")].GetReason(), codes.ResourceExhausted.String())

	// Refused or not, the commands leave the instance, and no result is stored.
	require.Eventually(t, func() bool { return len(th.book.remaining()) == 0 }, waitFor, 10*time.Millisecond)
	require.Empty(t, f.mandible.stored)
}

func TestOverduePollResultAsksMandibleForAnotherDispatch(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.tune = func(th *Thorax) {
		th.resultGrace = 50 * time.Millisecond
		th.sweepInterval = 10 * time.Millisecond
	}
	cmd := pollCommand("cmd-silent", "web-poll", 9)
	cmd.Timeout = durationpb.New(50 * time.Millisecond)
	f.mandible.queue(cmd)
	th := f.start(t)
	client := f.pollClient(t, th)

	resp, err := client.PollCommands(t.Context(), poll("web-poll", 1, 50*time.Second))
	require.NoError(t, err)
	require.Len(t, resp.GetCommands(), 1)

	r := receive(t, f.mandible.redispatches)
	require.Equal(t, commandID("cmd-silent"), r.GetCommandId())
	require.EqualValues(t, 9, r.GetLeaseEpoch())
	require.Contains(t, r.GetReason(), "reported no result")

	_, err = client.ReportResult(t.Context(), &mantisv1.ReportResultRequest{
		Target: "web-poll", CommandId: commandID("cmd-silent"), Result: &mantisv1.CommandResult{},
	})
	require.Equal(t, codes.NotFound, status.Code(err), "a late result is not stored: %v", err)
	require.Empty(t, f.mandible.stored)
}

func TestCommandsOfAPollAgentThatStoppedPollingAreHandedBack(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.tune = func(th *Thorax) {
		th.pollWindowFloor = 300 * time.Millisecond
		th.sweepInterval = 10 * time.Millisecond
	}
	f.mandible.queue(pollCommand("cmd-stranded", "web-poll", 6))
	th := f.start(t)

	// One poll, answered empty before the command is claimed, and no more.
	_, err := f.pollClient(t, th).PollCommands(t.Context(), poll("web-poll", 1, 0))
	require.NoError(t, err)

	rel := receive(t, f.mandible.releases)
	require.Equal(t, instanceID(1), rel.GetInstanceId())
	require.Len(t, rel.GetCommands(), 1)
	require.Equal(t, commandID("cmd-stranded"), rel.GetCommands()[0].GetCommandId())
	require.EqualValues(t, 6, rel.GetCommands()[0].GetLeaseEpoch())
	seen := len(f.mandible.heartbeatList())
	require.Eventually(t, func() bool {
		hbs := f.mandible.heartbeatList()
		return len(hbs) > seen && len(hbs[len(hbs)-1].GetPollTargets()) == 0
	}, waitFor, 10*time.Millisecond, "the silent target is no longer reported")
}

func TestDrainHandsBackUnhandedCommandsWaitsForRunningOnesAndStops(t *testing.T) {
	t.Parallel()
	f := setup(t)
	agent := &fakeAgent{block: make(chan struct{})}
	agentAddr := f.startAgent(t, agent)
	f.mandible.queue(listenCommand("cmd-running", agentAddr, 1))
	th := f.start(t)
	client := f.pollClient(t, th)

	// The listen command is running on its agent; a poll command is claimed
	// for a connected target whose agent has not taken it.
	require.Equal(t, commandID("cmd-running"), receive(t, agent.calls).cmd.GetId())
	_, err := client.PollCommands(t.Context(), poll("web-poll", 1, 0))
	require.NoError(t, err)
	f.mandible.queue(pollCommand("cmd-queued", "web-poll", 2))
	require.Eventually(t, func() bool {
		return f.mandible.pendingCount() == 0 && slices.Contains(th.book.remaining(), commandID("cmd-queued"))
	}, waitFor, 10*time.Millisecond)

	// An agent is waiting in a long poll when the drain starts.
	waiting := make(chan error, 1)
	go func() {
		_, err := f.pollClientFor(t, th, "idle-poll").PollCommands(t.Context(), poll("idle-poll", 1, 50*time.Second))
		waiting <- err
	}()
	require.Eventually(t, func() bool {
		return slices.Contains(th.book.connectedTargets(time.Now()), "idle-poll")
	}, waitFor, 10*time.Millisecond)

	th.stop() // as SIGTERM does
	err = receive(t, waiting)
	require.Equal(t, codes.Unavailable, status.Code(err), "the waiting poll is turned away at once: %v", err)
	rel := receive(t, f.mandible.releases)
	require.Equal(t, instanceID(1), rel.GetInstanceId())
	require.Len(t, rel.GetCommands(), 1)
	require.Equal(t, commandID("cmd-queued"), rel.GetCommands()[0].GetCommandId())
	require.EqualValues(t, 2, rel.GetCommands()[0].GetLeaseEpoch())
	require.Eventually(t, func() bool {
		for _, hb := range f.mandible.heartbeatList() {
			if hb.GetDraining() && hb.GetInstanceId() == instanceID(1) {
				return true
			}
		}
		return false
	}, waitFor, 10*time.Millisecond)
	_, err = th.FetchNow(t.Context())
	require.ErrorIs(t, err, ErrDraining)

	// A draining instance turns polls away at once, so agents back off.
	_, err = client.PollCommands(t.Context(), poll("web-poll", 1, 50*time.Second))
	require.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
	require.Contains(t, status.Convert(err).Message(), "draining")

	// It waits for the running call...
	select {
	case err := <-th.done:
		t.Fatalf("thorax stopped with a listen call running: %v", err)
	default:
	}
	close(agent.block)
	stored := receive(t, f.mandible.stored)
	require.Equal(t, commandID("cmd-running"), stored.GetCommandId())
	require.EqualValues(t, 1, stored.GetLeaseEpoch())

	// ...then stops its server and returns nil.
	require.NoError(t, th.wait(t))
	_, err = client.PollCommands(t.Context(), poll("web-poll", 1, 0))
	require.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
}

func TestRegistersAgainAfterMandibleDeclaresTheInstanceDead(t *testing.T) {
	t.Parallel()
	f := setup(t)
	th := f.start(t)
	require.Equal(t, instanceID(1), th.InstanceID())

	f.mandible.markDead(instanceID(1))
	require.Eventually(t, func() bool { return th.InstanceID() == instanceID(2) }, waitFor, 10*time.Millisecond)
	require.Eventually(t, func() bool {
		hbs, fetches := f.mandible.heartbeatList(), f.mandible.fetchList()
		return len(hbs) > 0 && hbs[len(hbs)-1].GetInstanceId() == instanceID(2) &&
			len(fetches) > 0 && fetches[len(fetches)-1].GetInstanceId() == instanceID(2)
	}, waitFor, 10*time.Millisecond)
}

func TestAgentsServerRefusesClientsWithoutACertificateFromItsCA(t *testing.T) {
	t.Parallel()
	f := setup(t)
	th := f.start(t)
	other, err := devcerts.Generate(t.TempDir(), nil)
	require.NoError(t, err)
	otherCert, otherKey := other.Pair("agent")

	for name, files := range map[string]tlsconf.Files{
		"no certificate":            {CA: f.certs.CACert()},
		"certificate of another CA": {CA: f.certs.CACert(), Cert: otherCert, Key: otherKey},
	} {
		_, err := thoraxClient(t, th.AgentsAddr(), files).PollCommands(t.Context(), poll("web-poll", 1, 0))
		require.Equal(t, codes.Unavailable, status.Code(err), "%s: %v", name, err)
	}
	_, err = f.pollClient(t, th).PollCommands(t.Context(), poll("web-poll", 1, 0))
	require.NoError(t, err, "an agent certificate from the CA is accepted")
}

func TestFetchNowClaimsTheNamedCommandsAtOnce(t *testing.T) {
	t.Parallel()
	f := setup(t)
	// No tick within the test: only the fetch at start and FetchNow claim.
	f.cfg.Polling.Interval.Duration = time.Hour
	f.cfg.Polling.FallbackInterval.Duration = time.Hour
	agent := &fakeAgent{}
	agentAddr := f.startAgent(t, agent)
	th := f.start(t)
	// The fetch at start reserves the whole capacity until its answer is admitted,
	// which comes after Mandible has recorded the call: wait for both, or FetchNow
	// finds the instance full.
	require.Eventually(t, func() bool {
		th.book.mu.Lock()
		defer th.book.mu.Unlock()
		return len(f.mandible.fetchList()) == 1 && th.book.reserved == 0
	}, waitFor, 10*time.Millisecond)

	f.mandible.queue(listenCommand("cmd-nudged", agentAddr, 0), listenCommand("cmd-other", agentAddr, 0))
	cmds, err := th.FetchNow(t.Context(), commandID("cmd-nudged"))
	require.NoError(t, err)
	require.Len(t, cmds, 1)
	require.Equal(t, commandID("cmd-nudged"), cmds[0].GetId())
	fetches := f.mandible.fetchList()
	require.Equal(t, []string{commandID("cmd-nudged")}, fetches[len(fetches)-1].GetCommandIds())
	require.EqualValues(t, 1, fetches[len(fetches)-1].GetMaxCommands())

	require.Equal(t, commandID("cmd-nudged"), receive(t, agent.calls).cmd.GetId())
	require.Equal(t, commandID("cmd-nudged"), receive(t, f.mandible.stored).GetCommandId())
	require.Equal(t, 1, f.mandible.pendingCount(), "the other command stays for a later claim")
}

func TestFetchNowRefusesBeyondCapacity(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.cfg.Polling.MaxHeldCommands = 1
	f.cfg.Polling.Interval.Duration = time.Hour
	f.cfg.Polling.FallbackInterval.Duration = time.Hour
	agent := &fakeAgent{block: make(chan struct{})}
	agentAddr := f.startAgent(t, agent)
	th := f.start(t)
	t.Cleanup(func() { close(agent.block) })
	require.Eventually(t, func() bool { return len(f.mandible.fetchList()) == 1 }, waitFor, 10*time.Millisecond)

	f.mandible.queue(listenCommand("cmd-1", agentAddr, 0), listenCommand("cmd-2", agentAddr, 0))
	cmds, err := th.FetchNow(t.Context())
	require.NoError(t, err)
	require.Len(t, cmds, 1, "one command fills the instance")
	fetches := f.mandible.fetchList()
	require.Len(t, fetches, 2)
	require.EqualValues(t, 1, fetches[1].GetMaxCommands())
	receive(t, agent.calls)

	_, err = th.FetchNow(t.Context(), commandID("cmd-2"))
	require.ErrorIs(t, err, ErrAtCapacity)
	require.Len(t, f.mandible.fetchList(), 2, "a full instance does not call Mandible")
}

func TestBrokerHealthSwitchesThePollingInterval(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.cfg.Polling.Interval.Duration = time.Hour
	f.cfg.Polling.FallbackInterval.Duration = 10 * time.Millisecond
	th := f.start(t)
	require.Equal(t, 10*time.Millisecond, th.pollInterval(), "no broker consumer has reported: fallback")

	fetches := func() int { return len(f.mandible.fetchList()) }
	require.Eventually(t, func() bool { return fetches() >= 3 }, waitFor, 10*time.Millisecond)

	th.SetBrokerHealthy(true)
	require.Equal(t, time.Hour, th.pollInterval())
	settled := fetches()
	require.Never(t, func() bool { return fetches() > settled+1 }, 300*time.Millisecond, 10*time.Millisecond,
		"a healthy broker leaves polling to the hour-long interval")

	// Back to the fallback at once, not after the hour already started.
	th.SetBrokerHealthy(false)
	now := fetches()
	require.Eventually(t, func() bool { return fetches() >= now+3 }, waitFor, 10*time.Millisecond)
}

func TestNewNamesTheBadCertificateSection(t *testing.T) {
	t.Parallel()
	f := setup(t)
	cfg := f.cfg
	cfg.Agents.CACertPath = cfg.Agents.CACertPath + ".missing"
	_, err := New(cfg, nil)
	require.ErrorContains(t, err, "agents TLS")
	cfg = f.cfg
	cfg.Mandible.KeyPath = cfg.Mandible.KeyPath + ".missing"
	_, err = New(cfg, nil)
	require.ErrorContains(t, err, "mandible TLS")
}

func TestDrainGivesUpOnCallsThatOutlastItsTimeout(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.cfg.Drain.Timeout.Duration = 200 * time.Millisecond
	agent := &fakeAgent{block: make(chan struct{})} // never closed
	agentAddr := f.startAgent(t, agent)
	f.mandible.queue(listenCommand("cmd-endless", agentAddr, 1))
	th := f.start(t)
	receive(t, agent.calls)

	th.stop()
	require.NoError(t, th.wait(t), "a drain that gives up still stops cleanly")
	require.Empty(t, f.mandible.stored)
	require.Empty(t, f.mandible.redispatches, "a command that may still run is not dispatched again")
}

func TestCommandsMandibleCancelsAreDroppedOrCancelledOnTheAgent(t *testing.T) {
	t.Parallel()
	f := setup(t)
	agent := &fakeAgent{block: make(chan struct{})} // ends only by cancellation
	agentAddr := f.startAgent(t, agent)
	f.mandible.queue(listenCommand("cmd-running", agentAddr, 1))
	th := f.start(t)
	require.Equal(t, commandID("cmd-running"), receive(t, agent.calls).cmd.GetId())
	_, err := f.pollClient(t, th).PollCommands(t.Context(), poll("web-poll", 1, 0))
	require.NoError(t, err)
	f.mandible.queue(pollCommand("cmd-queued", "web-poll", 2))
	require.Eventually(t, func() bool { return slices.Contains(th.book.remaining(), commandID("cmd-queued")) }, waitFor, 10*time.Millisecond)

	f.mandible.cancel(commandID("cmd-running"), commandID("cmd-queued"))
	require.Equal(t, commandID("cmd-running"), receive(t, agent.cancels))
	stored := receive(t, f.mandible.stored)
	require.Equal(t, commandID("cmd-running"), stored.GetCommandId())
	require.True(t, stored.GetResult().GetCancelled())
	require.Eventually(t, func() bool { return len(th.book.remaining()) == 0 }, waitFor, 10*time.Millisecond,
		"the queued command is dropped, not handed to its agent")
	require.Empty(t, f.mandible.releases, "a cancelled command is not handed back")
}

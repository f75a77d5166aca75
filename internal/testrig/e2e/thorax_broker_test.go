package e2e_test

import (
	"fmt"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/broker"
)

// Thorax's broker consumers against a real Mandible, PostgreSQL, Temporal and
// RabbitMQ (TLS, client certificates). Thorax runs in-process so that its log
// can be read; it reaches Mandible through a recording proxy, which tells a
// claim made for a nudge (it names the command) from a polling fetch.

// With a backlog in all three queues when Thorax starts consuming, it claims
// every high command before any normal one, and every normal one before any
// low one; each command runs once.
func TestThoraxBrokerDrainsBacklogHighBeforeNormalBeforeLow(t *testing.T) {
	r := setupBrokerRig(t, true)
	r.addTarget(t, "listen-1", r.placement)
	const each = 20
	var priorities []string
	for range each {
		priorities = append(priorities, "low", "normal", "high")
	}
	ids := r.enqueue(t, "listen-1", "true", priorities...)
	priorityOf := map[string]string{}
	for i, id := range ids {
		priorityOf[id.String()] = priorities[i]
	}
	// Mandible nudged every command while Thorax's user may not consume yet.
	require.Eventually(t, func() bool {
		return r.depth(t, broker.HighQueue) == each && r.depth(t, broker.NormalQueue) == each && r.depth(t, broker.LowQueue) == each
	}, brokerWait, 50*time.Millisecond, "Mandible did not nudge every command")

	th := r.startThorax(t, r.thoraxConfig())
	r.assign(t, "listen-1", th.InstanceID())
	r.grant(t)
	r.waitSucceeded(t, ids...)

	var order []string
	for _, f := range r.proxy.nudgeFetches(th.InstanceID()) {
		require.Len(t, f.named, 1)
		require.Equal(t, f.named, f.claimed, "each nudge claimed its command")
		order = append(order, priorityOf[f.named[0]])
	}
	want := slices.Concat(slices.Repeat([]string{"high"}, each), slices.Repeat([]string{"normal"}, each), slices.Repeat([]string{"low"}, each))
	require.Equal(t, want, order)
	for _, f := range r.proxy.pollFetches(th.InstanceID()) {
		require.Empty(t, f.claimed, "polling claimed nothing: the nudges did")
	}
	for _, id := range ids {
		require.Equal(t, 1, r.agent.runCounts()[id.String()], "command %s ran once", id)
	}
	for _, q := range []string{broker.HighQueue, broker.NormalQueue, broker.LowQueue, broker.DeadLetterQ} {
		require.Zero(t, r.depth(t, q), q)
	}
}

// Every step of the seed's Retry Behaviour, in order, on one Thorax. Mandible
// runs without a broker here and the test publishes the nudges, since the
// steps need max_retries values and x-death headers Mandible's own nudges do
// not all carry. A Thorax at capacity is busy, not failing: its nudges are
// acknowledged and spend no retry. The failures are a Mandible that cannot
// be reached for the nudges' claims (the proxy answers UNAVAILABLE), and a
// nudge that fails for good first asks Mandible for another dispatch.
func TestThoraxBrokerRetrySteps(t *testing.T) {
	r := setupBrokerRig(t, false)
	r.grant(t)
	cfg := r.thoraxConfig()
	cfg.Polling.MaxHeldCommands = 1
	th := r.startThorax(t, cfg)
	instance := th.InstanceID()
	r.addTarget(t, "listen-1", uuid.MustParse(instance))
	hold := r.enqueue(t, "listen-1", "hold", "high")[0]
	cmds := r.enqueue(t, "listen-1", "true", "normal", "normal", "normal", "normal")
	d, b, c, busy := cmds[0], cmds[1], cmds[2], cmds[3]
	dlq := broker.NewDLQ(r.adminQueue(), "retry test")
	dlqDepth := func(n int) func() bool { return func() bool { return r.depth(t, broker.DeadLetterQ) == n } }
	logged := func(msg string, kv ...string) int { return len(th.logs.matching(msg, kv...)) }
	attempts := func(cmd uuid.UUID) (status string, n int) {
		require.NoError(t, r.pool.QueryRow(r.ctx, `SELECT p.status, p.attempts FROM pending_dispatch_requests p
			JOIN command_queue c ON c.dispatch_request_id = p.id WHERE c.id = $1`, cmd).Scan(&status, &n))
		return status, n
	}

	r.nudge(t, hold, "high", 10)
	require.Equal(t, hold.String(), receiveID(t, r.agent.started), "the held command reached its agent")

	t.Run("at capacity the nudge is acknowledged: no retry spent, nothing in the DLQ", func(t *testing.T) {
		r.nudge(t, busy, "normal", 1)
		require.Eventually(t, func() bool {
			return logged("consumer busy: acknowledging nudge, polling claims the command", "command_id", busy.String()) == 1
		}, brokerWait, 20*time.Millisecond)
		require.Eventually(t, func() bool { return r.depth(t, broker.NormalQueue) == 0 }, brokerWait, 20*time.Millisecond)
		require.Zero(t, r.depth(t, broker.DeadLetterQ))
		require.Zero(t, logged("nudge processing failed: requeued for its one broker retry", "command_id", busy.String()))
		require.Equal(t, "queued", r.command(t, busy).status, "the command stays Mandible's, for polling to claim")
	})

	r.agent.release()
	r.waitSucceeded(t, hold)
	r.proxy.failNudgeClaims.Store(true)

	t.Run("first failure is requeued once; a redelivered failure asks Mandible for another dispatch, then goes to the DLQ", func(t *testing.T) {
		r.nudge(t, d, "normal", 1)
		require.Eventually(t, dlqDepth(1), brokerWait, 20*time.Millisecond)
		require.Equal(t, 1, logged("nudge processing failed: requeued for its one broker retry", "command_id", d.String(), "redelivered", "false"))
		require.Equal(t, 1, logged("mandible scheduled another dispatch of the nudged command", "command_id", d.String()))
		require.Equal(t, 1, logged("nudge processing failed for good: dead-lettered", "command_id", d.String(), "redelivered", "true"))
		require.Equal(t, 1, r.proxy.calledFor("ScheduleRedispatch", d.String()))
		require.Equal(t, "cancelled", r.command(t, d).status, "Mandible replaced the delivery")
		st, n := attempts(d)
		require.Contains(t, []string{"pending", "dispatched"}, st, "the request is Mandible's to deliver again")
		require.Equal(t, 1, n, "the failed delivery spent one retry of the budget")

		r.nudge(t, b, "normal", 3)
		require.Eventually(t, dlqDepth(2), brokerWait, 20*time.Millisecond)
		require.Equal(t, 1, logged("nudge processing failed: requeued for its one broker retry", "command_id", b.String()))
		listing, err := dlq.List(r.ctx, 2)
		require.NoError(t, err)
		for i, id := range []uuid.UUID{d, b} {
			m := listing.Messages[i]
			require.Equal(t, id.String(), m.Nudge.CommandID)
			require.Equal(t, []broker.Death{{Queue: broker.NormalQueue, Reason: "rejected", Count: 1, Exchange: broker.CommandsExchange,
				RoutingKeys: []string{"command.listen.normal"}, Time: m.Deaths[0].Time}}, m.Deaths)
		}
	})

	t.Run("max_retries 0 goes straight to the DLQ, after asking Mandible", func(t *testing.T) {
		r.nudge(t, c, "normal", 0)
		require.Eventually(t, dlqDepth(3), brokerWait, 20*time.Millisecond)
		require.Equal(t, 1, logged("nudge processing failed for good: dead-lettered", "command_id", c.String(), "redelivered", "false"))
		require.Zero(t, logged("nudge processing failed: requeued for its one broker retry", "command_id", c.String()))
		require.Equal(t, 1, r.proxy.calledFor("ScheduleRedispatch", c.String()))
	})

	t.Run("a give-up for a command claimed since is refused by Mandible's fencing", func(t *testing.T) {
		r.nudge(t, hold, "high", 0)
		require.Eventually(t, dlqDepth(4), brokerWait, 20*time.Millisecond)
		require.Equal(t, 1, logged("mandible refused another dispatch of the nudged command", "command_id", hold.String()))
		require.Equal(t, "succeeded", r.command(t, hold).status)
	})

	r.proxy.failNudgeClaims.Store(false)

	t.Run("malformed nudges go to the DLQ and thorax keeps running", func(t *testing.T) {
		r.publish(t, "low", nil, []byte("not json"))
		r.publish(t, "low", nil, []byte(`{"command_id":"cmd-1","target":"listen-1","mode":"listen","priority":"low","max_retries":3}`))
		require.Eventually(t, dlqDepth(6), brokerWait, 20*time.Millisecond)
		require.Equal(t, 1, logged("dead-lettering malformed nudge"))
		require.Equal(t, 1, logged("dead-lettering nudge that cannot be processed", "command_id", "cmd-1"))
	})

	t.Run("a nudge for a finished command is acknowledged, one for an unknown command goes to the DLQ", func(t *testing.T) {
		before := r.proxy.calledFor("ScheduleRedispatch", hold.String())
		r.nudge(t, hold, "high", 10)
		unknown := uuid.New()
		r.nudge(t, unknown, "high", 3)
		require.Eventually(t, dlqDepth(7), brokerWait, 20*time.Millisecond)
		// The nudges were handled in order: the finished command's, settled
		// first, was not dead-lettered.
		require.Equal(t, 1, logged("dead-lettering nudge that cannot be processed", "command_id", unknown.String()))
		require.Equal(t, before+1, r.proxy.calledFor("ScheduleRedispatch", hold.String()), "the finished command was looked up")
		require.Zero(t, r.depth(t, broker.HighQueue))
		require.Equal(t, 1, r.agent.runCounts()[hold.String()], "the finished command did not run again")
	})

	t.Run("an x-death count at max_retries goes to the DLQ unprocessed", func(t *testing.T) {
		// d heads the DLQ with one death and max_retries 1: requeued, it
		// arrives spent.
		claims := r.proxy.calledFor("FetchPendingCommands", d.String())
		moved, err := dlq.Requeue(r.ctx, "normal", 1)
		require.NoError(t, err)
		require.Equal(t, 1, moved)
		require.Eventually(t, func() bool {
			return logged("dead-lettering nudge unprocessed: its x-death count meets max_retries", "command_id", d.String()) == 1
		}, brokerWait, 20*time.Millisecond)
		require.Eventually(t, dlqDepth(7), brokerWait, 20*time.Millisecond)
		require.Equal(t, claims, r.proxy.calledFor("FetchPendingCommands", d.String()), "no claim for a spent nudge")
		listing, err := dlq.List(r.ctx, 7)
		require.NoError(t, err)
		last := listing.Messages[6]
		require.Equal(t, d.String(), last.Nudge.CommandID)
		require.Len(t, last.Deaths, 1)
		require.EqualValues(t, 2, last.Deaths[0].Count, "the broker counted the second death")
	})

	t.Run("a requeued nudge with retries left is processed", func(t *testing.T) {
		// b now heads the DLQ: one death, max_retries 3. Its command was
		// replaced by another delivery, so the claim finds nothing to run.
		claims := r.proxy.calledFor("FetchPendingCommands", b.String())
		moved, err := dlq.Requeue(r.ctx, "high", 1)
		require.NoError(t, err)
		require.Equal(t, 1, moved)
		require.Eventually(t, func() bool { return r.proxy.calledFor("FetchPendingCommands", b.String()) == claims+1 }, brokerWait, 20*time.Millisecond)
		require.Eventually(t, func() bool { return r.depth(t, broker.HighQueue) == 0 }, brokerWait, 20*time.Millisecond)
		require.Eventually(t, dlqDepth(6), brokerWait, 20*time.Millisecond)
		require.Zero(t, r.agent.runCounts()[b.String()]+r.agent.runCounts()[c.String()]+r.agent.runCounts()[d.String()],
			"commands whose nudges failed did not run")
	})
}

// When the broker goes away mid-run, Thorax switches to the short polling
// interval and commands still complete, through polling; when it is back,
// Thorax consumes again (the same consumer tags) and the nudges that waited
// for it are acknowledged without running anything twice. Every command runs
// exactly once.
//
// The shared broker cannot be stopped, so the outage is made on the broker:
// Thorax's user loses its permissions on the vhost, and the management API
// closes its connections (DELETE /api/connections/{name}), which is what a
// consumer sees when a broker stops. Until the permissions come back, every
// reconnection is refused, as it would be by a broker that is down; Mandible,
// another user, keeps publishing nudges meanwhile.
func TestThoraxBrokerOutageFallsBackToPollingAndEachCommandRunsOnce(t *testing.T) {
	r := setupBrokerRig(t, true)
	r.grant(t)
	cfg := r.thoraxConfig()
	cfg.Polling.FallbackInterval.Duration = 200 * time.Millisecond
	th := r.startThorax(t, cfg)
	instance := th.InstanceID()
	r.addTarget(t, "listen-1", uuid.MustParse(instance))
	switched := func(healthy bool) int {
		return len(th.logs.matching("polling interval switched", "broker_healthy", fmt.Sprint(healthy)))
	}
	require.Eventually(t, func() bool { return switched(true) == 1 }, brokerWait, 20*time.Millisecond, "consumers never reported the broker healthy")
	tags := waitConsumerTags(t, r, instance)

	mixed := []string{"high", "normal", "low", "high", "normal", "low", "high", "normal", "low", "normal"}
	before := r.enqueue(t, "listen-1", "true", mixed...)
	r.waitSucceeded(t, before...)

	r.cutOff(t)
	require.Eventually(t, func() bool { return switched(false) == 1 }, brokerWait, 20*time.Millisecond, "thorax did not notice the outage")
	during := r.enqueue(t, "listen-1", "true", mixed...)
	r.waitSucceeded(t, during...)
	require.Eventually(t, func() bool {
		return r.depth(t, broker.HighQueue)+r.depth(t, broker.NormalQueue)+r.depth(t, broker.LowQueue) == len(during)
	}, brokerWait, 50*time.Millisecond, "the nudges of the outage wait in the queues")

	r.grant(t)
	require.Eventually(t, func() bool { return switched(true) == 2 }, brokerWait, 20*time.Millisecond, "thorax did not consume again")
	require.Eventually(t, func() bool {
		return r.depth(t, broker.HighQueue)+r.depth(t, broker.NormalQueue)+r.depth(t, broker.LowQueue) == 0
	}, brokerWait, 50*time.Millisecond, "the waiting nudges were not consumed")
	require.Equal(t, tags, waitConsumerTags(t, r, instance), "one consumer tag per instance, kept across reconnections")
	after := r.enqueue(t, "listen-1", "true", mixed...)
	r.waitSucceeded(t, after...)

	claimedBy := func(fetches []recordedFetch) map[string]bool {
		out := map[string]bool{}
		for _, f := range fetches {
			for _, id := range f.claimed {
				out[id] = true
			}
		}
		return out
	}
	byNudge, byPoll := claimedBy(r.proxy.nudgeFetches(instance)), claimedBy(r.proxy.pollFetches(instance))
	for _, id := range slices.Concat(before, after) {
		require.True(t, byNudge[id.String()], "%s was claimed for its nudge", id)
	}
	for _, id := range during {
		require.True(t, byPoll[id.String()], "%s was claimed by polling during the outage", id)
	}
	all := slices.Concat(before, during, after)
	runs := r.agent.runCounts()
	require.Len(t, runs, len(all), "nothing else ran")
	for _, id := range all {
		require.Equal(t, 1, runs[id.String()], "%s ran once", id)
		s := r.command(t, id)
		require.Equal(t, "succeeded", s.status)
		require.EqualValues(t, 1, s.leaseEpoch, "%s was claimed once", id)
	}
	require.Zero(t, r.depth(t, broker.DeadLetterQ), "no nudge was dead-lettered")
}

// When Mandible declares the instance dead and Thorax registers again, its
// consumers consume again under tags carrying the new instance id, and nudges
// are claimed under it.
func TestThoraxBrokerConsumesWithNewTagsAfterRegisteringAgain(t *testing.T) {
	r := setupBrokerRig(t, true)
	r.grant(t)
	th := r.startThorax(t, r.thoraxConfig())
	first := th.InstanceID()
	waitConsumerTags(t, r, first)

	_, err := r.pool.Exec(r.ctx, `UPDATE thorax_instances SET status = 'dead' WHERE id = $1`, first)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		id := th.InstanceID()
		return id != "" && id != first
	}, brokerWait, 20*time.Millisecond, "thorax did not register again")
	second := th.InstanceID()
	waitConsumerTags(t, r, second)
	require.Len(t, th.logs.matching("instance id changed: consuming again with new consumer tags", "old_instance_id", first), 1)

	r.addTarget(t, "listen-1", uuid.MustParse(second))
	ids := r.enqueue(t, "listen-1", "true", "normal")
	r.waitSucceeded(t, ids...)
	require.Equal(t, []recordedFetch{{named: []string{ids[0].String()}, claimed: []string{ids[0].String()}}}, r.proxy.nudgeFetches(second))
}

// waitConsumerTags waits until the vhost's three command queues each have the
// consumer thorax-{instance}-{uuid}-{priority}, one uuid for all three, and
// returns the tags.
func waitConsumerTags(t *testing.T, r *brokerRig, instance string) map[string]string {
	t.Helper()
	pattern := regexp.MustCompile(`^thorax-` + regexp.QuoteMeta(instance) + `-([0-9a-f-]{36})-(high|normal|low)$`)
	var tags map[string]string
	require.Eventually(t, func() bool {
		tags = r.consumerTags(t)
		if len(tags) != 3 {
			return false
		}
		var ids []string
		for queue, tag := range tags {
			m := pattern.FindStringSubmatch(tag)
			if m == nil || broker.CommandQueue(m[2]) != queue {
				return false
			}
			ids = append(ids, m[1])
		}
		return ids[0] == ids[1] && ids[1] == ids[2]
	}, brokerWait, 200*time.Millisecond, "the broker never listed the consumers of instance %s (last: %v)", instance, tags)
	return tags
}

func receiveID(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case id := <-ch:
		return id
	case <-time.After(brokerWait):
		t.Fatal("nothing received")
		return ""
	}
}

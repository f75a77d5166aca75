package broker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/broker"
	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// waitFor bounds every wait of these tests for something that should happen.
const waitFor = 30 * time.Second

// brokerBundle is a test's own vhost and a channel on it.
type brokerBundle struct {
	b   testenv.Broker
	cfg config.Queue
	ch  *amqp.Channel
}

// setup gives the test a vhost of its own; with topology, the seed's topology
// declared on it as Mandible declares it.
func setup(t *testing.T, topology bool) brokerBundle {
	t.Helper()
	b := testenv.RabbitMQ(t)
	conn, err := amqp.DialConfig(b.URL(), amqp.Config{TLSClientConfig: b.TLSConfig(t)})
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	require.NoError(t, err)
	if topology {
		require.NoError(t, broker.Declare(ch, broker.MantisTopology()))
	}
	require.NoError(t, ch.Confirm(false))
	return brokerBundle{b: b, ch: ch, cfg: config.Queue{
		Enabled: true, Host: b.Host, Port: b.Port, Username: b.User, Password: b.Password, VHost: b.VHost,
		CACertPath: b.CACert, ClientCertPath: b.ClientCert, ClientKeyPath: b.ClientKey,
	}}
}

// publish sends bodies to the queue of priority through mantis.commands,
// persistent, and waits for the broker's confirms.
func (bb brokerBundle) publish(t *testing.T, priority string, headers amqp.Table, bodies ...[]byte) {
	t.Helper()
	for _, body := range bodies {
		dc, err := bb.ch.PublishWithDeferredConfirmWithContext(context.Background(), broker.CommandsExchange,
			broker.CommandRoutingKey("poll", priority), true, false,
			amqp.Publishing{DeliveryMode: amqp.Persistent, Headers: headers, Body: body})
		require.NoError(t, err)
		ok, err := dc.WaitContext(context.Background())
		require.NoError(t, err)
		require.True(t, ok)
	}
}

func (bb brokerBundle) depth(t *testing.T, queue string) int {
	t.Helper()
	q, err := bb.ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	require.NoError(t, err)
	return q.Messages
}

// consumer runs ConsumePriorities with handler until the test ends.
type consumer struct {
	done      chan error
	consuming chan struct{}
	stop      context.CancelFunc
}

func (bb brokerBundle) consume(t *testing.T, tagPrefix string, handler broker.Handler) *consumer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c := &consumer{done: make(chan error, 1), consuming: make(chan struct{}), stop: cancel}
	go func() {
		c.done <- broker.ConsumePriorities(ctx, broker.ConsumerOptions{
			Queue: bb.cfg, Name: "consumer test", TagPrefix: tagPrefix, Prefetch: 10, Handler: handler,
			Consuming: func() { close(c.consuming) },
		})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-c.done:
			require.NoError(t, err)
		case <-time.After(waitFor):
			t.Error("consumer did not stop")
		}
	})
	select {
	case <-c.consuming:
	case err := <-c.done:
		t.Fatalf("consumer stopped before consuming: %v", err)
	case <-time.After(waitFor):
		t.Fatal("consumer did not start")
	}
	return c
}

// With a backlog in all three queues, everything high is handled before
// anything normal, and everything normal before anything low, across the
// three consumers.
func TestBrokerConsumerDrainsHighBeforeNormalBeforeLow(t *testing.T) {
	t.Parallel()
	bb := setup(t, true)
	const each = 40
	// Published lowest first, so that arrival order is the opposite of the
	// order wanted.
	for _, p := range []string{"low", "normal", "high"} {
		var bodies [][]byte
		for i := range each {
			bodies = append(bodies, fmt.Appendf(nil, "%s-%d", p, i))
		}
		bb.publish(t, p, nil, bodies...)
	}

	var mu sync.Mutex
	var order []string
	all := make(chan struct{})
	bb.consume(t, "order-test", func(_ context.Context, d broker.Delivery) broker.Verdict {
		mu.Lock()
		defer mu.Unlock()
		require.True(t, strings.HasPrefix(string(d.Body), d.Priority+"-"), "delivery %s came from %s", d.Body, d.Priority)
		order = append(order, d.Priority)
		if len(order) == 3*each {
			close(all)
		}
		return broker.Ack
	})
	select {
	case <-all:
	case <-time.After(waitFor):
		t.Fatalf("handled %d of %d", len(order), 3*each)
	}
	mu.Lock()
	defer mu.Unlock()
	want := slices.Concat(slices.Repeat([]string{"high"}, each), slices.Repeat([]string{"normal"}, each), slices.Repeat([]string{"low"}, each))
	require.Equal(t, want, order)
	for _, p := range broker.Priorities {
		require.Zero(t, bb.depth(t, broker.CommandQueue(p)), "every delivery was acknowledged")
	}
}

// Without the topology the consumer says so, and declares nothing.
func TestBrokerConsumerWaitsForTheTopology(t *testing.T) {
	t.Parallel()
	bb := setup(t, false)
	err := broker.ConsumePriorities(context.Background(), broker.ConsumerOptions{
		Queue: bb.cfg, Name: "consumer test", TagPrefix: "t", Prefetch: 10,
		Handler: func(context.Context, broker.Delivery) broker.Verdict { return broker.Ack },
	})
	require.ErrorIs(t, err, broker.ErrTopologyMissing)
	var queues []struct {
		Name string `json:"name"`
	}
	body, err := bb.b.Management(context.Background(), http.MethodGet, "/queues/"+url.PathEscape(bb.b.VHost), nil)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(body, &queues))
	require.Empty(t, queues, "a consumer never declares a queue")
}

// Each queue gets one consumer, tagged with the prefix and its priority, with
// manual acknowledgement and the prefetch asked for.
func TestBrokerConsumerRegistersOneTaggedConsumerPerQueue(t *testing.T) {
	t.Parallel()
	bb := setup(t, true)
	bb.consume(t, "thorax-test-tags", func(context.Context, broker.Delivery) broker.Verdict { return broker.Ack })
	type mgmtConsumer struct {
		Tag           string `json:"consumer_tag"`
		AckRequired   bool   `json:"ack_required"`
		PrefetchCount int    `json:"prefetch_count"`
		Queue         struct {
			Name string `json:"name"`
		} `json:"queue"`
	}
	var got []mgmtConsumer
	require.Eventually(t, func() bool {
		body, err := bb.b.Management(context.Background(), http.MethodGet, "/consumers/"+url.PathEscape(bb.b.VHost), nil)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(body, &got))
		return len(got) == 3
	}, waitFor, 200*time.Millisecond, "the management API never listed three consumers")
	tags := map[string]string{}
	for _, c := range got {
		require.True(t, c.AckRequired, c.Tag)
		require.Equal(t, 10, c.PrefetchCount, c.Tag)
		tags[c.Queue.Name] = c.Tag
	}
	require.Equal(t, map[string]string{
		broker.HighQueue: "thorax-test-tags-high", broker.NormalQueue: "thorax-test-tags-normal", broker.LowQueue: "thorax-test-tags-low",
	}, tags)
}

// Each verdict does what it says on the broker: requeue comes back
// redelivered, dead-lettering lands in mantis.dlq with an x-death entry.
func TestVerdictsOnTheBroker(t *testing.T) {
	t.Parallel()
	bb := setup(t, true)
	bb.publish(t, "normal", nil, []byte("requeue-me"), []byte("dead-letter-me"))
	seen := make(chan broker.Delivery, 10)
	bb.consume(t, "verdicts", func(_ context.Context, d broker.Delivery) broker.Verdict {
		seen <- d
		switch {
		case string(d.Body) == "dead-letter-me":
			return broker.DeadLetter
		case !d.Redelivered:
			return broker.Requeue
		}
		return broker.Ack
	})
	got := map[string][]bool{}
	for range 3 {
		select {
		case d := <-seen:
			got[string(d.Body)] = append(got[string(d.Body)], d.Redelivered)
		case <-time.After(waitFor):
			t.Fatalf("deliveries so far: %v", got)
		}
	}
	require.Equal(t, map[string][]bool{"requeue-me": {false, true}, "dead-letter-me": {false}}, got)
	require.Eventually(t, func() bool { return bb.depth(t, broker.DeadLetterQ) == 1 }, waitFor, 50*time.Millisecond)
	msg, ok, err := bb.ch.Get(broker.DeadLetterQ, true)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "dead-letter-me", string(msg.Body))
	deaths := broker.Deaths(msg.Headers)
	require.Len(t, deaths, 1)
	require.Equal(t, broker.NormalQueue, deaths[0].Queue)
	require.Equal(t, "rejected", deaths[0].Reason)
	require.EqualValues(t, 1, deaths[0].Count)
}

// A consumer whose connection the broker closes returns the reason, so its
// owner can report the broker unhealthy and reconnect.
func TestBrokerConsumerReturnsWhenTheConnectionCloses(t *testing.T) {
	t.Parallel()
	bb := setup(t, true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	consuming := make(chan struct{})
	name := "closing consumer " + bb.b.VHost
	go func() {
		done <- broker.ConsumePriorities(ctx, broker.ConsumerOptions{
			Queue: bb.cfg, Name: name, TagPrefix: "closing", Prefetch: 10,
			Handler:   func(context.Context, broker.Delivery) broker.Verdict { return broker.Ack },
			Consuming: func() { close(consuming) },
		})
	}()
	select {
	case <-consuming:
	case err := <-done:
		t.Fatal(err)
	}
	closeConnections(t, bb.b, func(c mgmtConnection) bool { return c.ClientProperties.ConnectionName == name })
	select {
	case err := <-done:
		require.ErrorContains(t, err, "CONNECTION_FORCED")
	case <-time.After(waitFor):
		t.Fatal("consumer did not notice its connection closed")
	}
}

type mgmtConnection struct {
	Name             string `json:"name"`
	User             string `json:"user"`
	VHost            string `json:"vhost"`
	ClientProperties struct {
		ConnectionName string `json:"connection_name"`
	} `json:"client_properties"`
}

// closeConnections closes, through the management API, the connections of the
// test's vhost that match, once there is at least one.
func closeConnections(t *testing.T, b testenv.Broker, match func(mgmtConnection) bool) {
	t.Helper()
	var found []mgmtConnection
	require.Eventually(t, func() bool {
		body, err := b.Management(context.Background(), http.MethodGet, "/vhosts/"+url.PathEscape(b.VHost)+"/connections", nil)
		require.NoError(t, err)
		var all []mgmtConnection
		require.NoError(t, json.Unmarshal(body, &all))
		found = slices.DeleteFunc(all, func(c mgmtConnection) bool { return !match(c) })
		return len(found) > 0
	}, waitFor, 200*time.Millisecond, "the management API never listed the connection")
	for _, c := range found {
		_, err := b.Management(context.Background(), http.MethodDelete, "/connections/"+url.PathEscape(c.Name), nil)
		require.NoError(t, err)
	}
}

package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"testing"
	"time"

	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/broker"
	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/schema"
)

type mgmtQueue struct {
	Name       string         `json:"name"`
	Durable    bool           `json:"durable"`
	AutoDelete bool           `json:"auto_delete"`
	Exclusive  bool           `json:"exclusive"`
	Type       string         `json:"type"`
	Arguments  map[string]any `json:"arguments"`
}

func getJSON(t *testing.T, b testenv.Broker, path string, v any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	body, err := b.Management(ctx, http.MethodGet, path, nil)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(body, v))
}

// After start-up the broker holds exactly the seed's exchanges, queues (with their
// arguments) and bindings, read back through the management API.
func TestMandibleDeclaresTheSeedTopology(t *testing.T) {
	b := testenv.RabbitMQ(t)
	f := setupDispatchFixture(t, 1)
	opts := replicaOptions{ID: uniqueName("topo"), DatabaseURL: f.url, Temporal: f.temporal, Broker: &b}
	startReplica(t, opts).stop(t)
	// Declaring again on the next start is idempotent.
	opts.ID = uniqueName("topo")
	startReplica(t, opts)

	vh := url.PathEscape(b.VHost)
	var exchanges []struct {
		Name    string `json:"name"`
		Type    string `json:"type"`
		Durable bool   `json:"durable"`
	}
	getJSON(t, b, "/exchanges/"+vh, &exchanges)
	got := map[string]string{}
	for _, x := range exchanges {
		if x.Name == "" || len(x.Name) > 4 && x.Name[:4] == "amq." {
			continue // the broker's own
		}
		require.True(t, x.Durable, x.Name)
		got[x.Name] = x.Type
	}
	require.Equal(t, map[string]string{"mantis.commands": "direct", "mantis.analysis": "direct", "mantis.dlx": "fanout"}, got)

	var queues []mgmtQueue
	getJSON(t, b, "/queues/"+vh, &queues)
	args := map[string]map[string]any{}
	for _, q := range queues {
		require.True(t, q.Durable && !q.AutoDelete && !q.Exclusive, q.Name)
		require.Equal(t, "classic", q.Type, q.Name)
		args[q.Name] = q.Arguments
	}
	command := func(ttl float64) map[string]any {
		return map[string]any{"x-message-ttl": ttl, "x-dead-letter-exchange": "mantis.dlx", "x-max-priority": float64(10), "x-queue-type": "classic"}
	}
	require.Equal(t, map[string]map[string]any{
		"mantis.commands.priority.high":   command(1_800_000),
		"mantis.commands.priority.normal": command(3_600_000),
		"mantis.commands.priority.low":    command(7_200_000),
		"mantis.analysis.requests":        {"x-message-ttl": float64(14_400_000), "x-dead-letter-exchange": "mantis.dlx"},
		"mantis.dlq":                      {"x-message-ttl": float64(604_800_000)},
	}, args)

	var bindings []struct {
		Source      string `json:"source"`
		Destination string `json:"destination"`
		RoutingKey  string `json:"routing_key"`
	}
	getJSON(t, b, "/bindings/"+vh, &bindings)
	var bs []string
	for _, x := range bindings {
		if x.Source == "" {
			continue // the default exchange's implicit bindings
		}
		bs = append(bs, fmt.Sprintf("%s -[%s]-> %s", x.Source, x.RoutingKey, x.Destination))
	}
	sort.Strings(bs)
	require.Equal(t, []string{
		"mantis.analysis -[analysis.request]-> mantis.analysis.requests",
		"mantis.commands -[command.listen.high]-> mantis.commands.priority.high",
		"mantis.commands -[command.listen.low]-> mantis.commands.priority.low",
		"mantis.commands -[command.listen.normal]-> mantis.commands.priority.normal",
		"mantis.commands -[command.poll.high]-> mantis.commands.priority.high",
		"mantis.commands -[command.poll.low]-> mantis.commands.priority.low",
		"mantis.commands -[command.poll.normal]-> mantis.commands.priority.normal",
		"mantis.dlx -[]-> mantis.dlq",
	}, bs)
}

// A quorum mantis.commands.priority.high that already exists makes Mandible stop with
// PRECONDITION_FAILED and the recovery steps; it deletes nothing.
func TestMandibleStopsOnPreconditionFailed(t *testing.T) {
	b := testenv.RabbitMQ(t)
	conn, err := amqp.DialConfig(b.URL(), amqp.Config{TLSClientConfig: b.TLSConfig(t)})
	require.NoError(t, err)
	defer conn.Close()
	ch, err := conn.Channel()
	require.NoError(t, err)
	_, err = ch.QueueDeclare(broker.HighQueue, true, false, false, false, amqp.Table{"x-queue-type": "quorum"})
	require.NoError(t, err)

	f := setupDispatchFixture(t, 1)
	r := launchReplica(t, replicaOptions{ID: uniqueName("pre"), DatabaseURL: f.url, Temporal: f.temporal, Broker: &b})
	require.NotZero(t, r.exitCode(t, 90*time.Second), "Mandible must stop on PRECONDITION_FAILED")
	log := r.log()
	require.Contains(t, log, "PRECONDITION_FAILED")
	require.Contains(t, log, "mantis.commands.priority.high")
	require.Contains(t, log, "rabbitmqctl -p "+b.VHost+` delete_queue "mantis.commands.priority.$p"`, "the recovery steps name the configured vhost")

	var q mgmtQueue
	getJSON(t, b, "/queues/"+url.PathEscape(b.VHost)+"/"+broker.HighQueue, &q)
	require.Equal(t, "quorum", q.Type, "Mandible never deletes a queue by itself")
}

// Each dispatched command is nudged on mantis.commands with routing key
// command.<mode>.<priority>, persistent, carrying what Thorax needs.
func TestMandiblePublishesNudges(t *testing.T) {
	b := testenv.RabbitMQ(t)
	f := setupDispatchFixture(t, 1)
	startReplica(t, replicaOptions{ID: uniqueName("nudge"), DatabaseURL: f.url, Temporal: f.temporal, Broker: &b})

	_, err := schema.EnqueueDispatchRequests(f.ctx, f.pool, []schema.NewDispatchRequest{
		{IdempotencyKey: uniqueName("k"), Target: f.targets[0], Command: "true", Priority: "low"},
	})
	require.NoError(t, err)

	conn, err := amqp.DialConfig(b.URL(), amqp.Config{TLSClientConfig: b.TLSConfig(t)})
	require.NoError(t, err)
	defer conn.Close()
	ch, err := conn.Channel()
	require.NoError(t, err)
	var msg amqp.Delivery
	require.Eventually(t, func() bool {
		m, ok, err := ch.Get(broker.LowQueue, true)
		require.NoError(t, err)
		msg = m
		return ok
	}, 30*time.Second, 100*time.Millisecond, "no nudge on the low queue")
	require.Equal(t, "command.poll.low", msg.RoutingKey)
	require.Equal(t, uint8(amqp.Persistent), msg.DeliveryMode)
	n, err := broker.DecodeNudge(msg.Body)
	require.NoError(t, err)
	var cmdID uuid.UUID
	require.NoError(t, f.pool.QueryRow(f.ctx, `SELECT id FROM command_queue`).Scan(&cmdID))
	require.Equal(t, cmdID.String(), n.CommandID)
	require.Equal(t, f.targets[0], n.Target)
	require.Equal(t, "poll", n.Mode)
	require.NotEmpty(t, n.AssignedInstanceID)
	require.Equal(t, domain.MaxDispatchRetries, n.MaxRetries)
}

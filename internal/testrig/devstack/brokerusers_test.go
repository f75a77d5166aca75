package devstack_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/broker"
	"github.com/mantis-deploy/mantis/internal/testrig/devstack"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

// Thorax's broker user, with the stack's ThoraxPermissions, consumes a command queue
// but the real broker refuses it declaring and publishing; Mandible's user may do all three.
func TestThoraxBrokerUserConsumesButCannotDeclareOrPublish(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := testenv.RabbitMQ(t)
	mgmt, err := devstack.ManagementClient(b.CACert)
	require.NoError(t, err)
	admin := devstack.BrokerAdmin{Client: mgmt, API: b.ManagementURL + "/api", User: b.User, Password: b.Password}

	var r [6]byte
	_, _ = rand.Read(r[:])
	user, password := "thorax-test-"+hex.EncodeToString(r[:]), hex.EncodeToString(r[:])+"-password"
	require.NoError(t, admin.EnsureUser(ctx, b.VHost, user, password, devstack.ThoraxPermissions))
	t.Cleanup(func() { _ = admin.DeleteUser(context.Background(), user) })

	// The topology, declared by an administrator as Mandible would, with a nudge on the high queue.
	adminConn, err := amqp.DialConfig(b.URL(), amqp.Config{TLSClientConfig: b.TLSConfig(t)})
	require.NoError(t, err)
	defer adminConn.Close()
	adminCh, err := adminConn.Channel()
	require.NoError(t, err)
	require.NoError(t, broker.DeclareIn(adminCh, broker.MantisTopology(), b.VHost))
	require.NoError(t, adminCh.PublishWithContext(ctx, broker.CommandsExchange, broker.CommandRoutingKey("poll", "high"), false, false,
		amqp.Publishing{Body: []byte("nudge")}))

	thoraxURL := fmt.Sprintf("amqps://%s:%s@%s:%d/%s", user, url.QueryEscape(password), b.Host, b.Port, url.PathEscape(b.VHost))
	conn, err := amqp.DialConfig(thoraxURL, amqp.Config{TLSClientConfig: b.TLSConfig(t)})
	require.NoError(t, err)
	defer conn.Close()

	// Consuming, as Thorax does: passive declare, consume, acknowledge.
	ch, err := conn.Channel()
	require.NoError(t, err)
	_, err = ch.QueueDeclarePassive(broker.HighQueue, true, false, false, false, nil)
	require.NoError(t, err)
	deliveries, err := ch.Consume(broker.HighQueue, "", false, false, false, false, nil)
	require.NoError(t, err)
	select {
	case d := <-deliveries:
		require.Equal(t, "nudge", string(d.Body))
		require.NoError(t, d.Ack(false))
	case <-time.After(10 * time.Second):
		t.Fatal("Thorax's user received nothing from the high queue")
	}

	// Reading another queue, declaring and publishing are refused by the broker.
	requireRefused := func(what string, op func(ch *amqp.Channel) error) {
		t.Helper()
		ch, err := conn.Channel()
		require.NoError(t, err)
		closed := ch.NotifyClose(make(chan *amqp.Error, 1))
		err = op(ch)
		if err == nil {
			select { // a publish is refused asynchronously, by closing the channel
			case e := <-closed:
				err = e
			case <-time.After(10 * time.Second):
			}
		}
		var amqpErr *amqp.Error
		require.ErrorAs(t, err, &amqpErr, what)
		require.Equal(t, amqp.AccessRefused, amqpErr.Code, "%s: %v", what, amqpErr)
	}
	requireRefused("declaring the topology", func(ch *amqp.Channel) error {
		return broker.DeclareIn(ch, broker.MantisTopology(), b.VHost)
	})
	requireRefused("declaring a queue of its own", func(ch *amqp.Channel) error {
		_, err := ch.QueueDeclare("thorax.own", false, true, false, false, nil)
		return err
	})
	requireRefused("publishing a nudge", func(ch *amqp.Channel) error {
		return ch.PublishWithContext(ctx, broker.CommandsExchange, broker.CommandRoutingKey("poll", "high"), false, false,
			amqp.Publishing{Body: []byte("forged")})
	})
	requireRefused("reading the dead-letter queue", func(ch *amqp.Channel) error {
		_, _, err := ch.Get(broker.DeadLetterQ, false)
		return err
	})
}

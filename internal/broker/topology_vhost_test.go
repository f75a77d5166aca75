package broker_test

import (
	"context"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/broker"
	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

// The recovery steps of a PRECONDITION_FAILED name the vhost Mandible is configured
// with, not the seed's /mantis.
func TestPreconditionRecoveryNamesTheConfiguredVHost(t *testing.T) {
	t.Parallel()
	b := testenv.RabbitMQ(t)
	conn, err := amqp.DialConfig(b.URL(), amqp.Config{TLSClientConfig: b.TLSConfig(t)})
	require.NoError(t, err)
	defer conn.Close()
	ch, err := conn.Channel()
	require.NoError(t, err)
	_, err = ch.QueueDeclare(broker.HighQueue, true, false, false, false, amqp.Table{"x-queue-type": "quorum"})
	require.NoError(t, err)

	cfg := config.Queue{Enabled: true, Host: b.Host, Port: b.Port, Username: b.User, Password: b.Password, VHost: b.VHost,
		CACertPath: b.CACert, ClientCertPath: b.ClientCert, ClientKeyPath: b.ClientKey}
	client := broker.NewClient(cfg, "vhost test", nil)
	defer client.Close()
	err = client.DeclareTopology(context.Background())
	var pre *broker.PreconditionError
	require.ErrorAs(t, err, &pre)
	require.Equal(t, b.VHost, pre.VHost)
	require.Contains(t, err.Error(), "rabbitmqctl -p "+b.VHost+" clear_policy")
	require.Contains(t, err.Error(), "rabbitmqctl -p "+b.VHost+` delete_queue "mantis.commands.priority.$p"`)
	require.NotContains(t, err.Error(), "-p /mantis ")
}

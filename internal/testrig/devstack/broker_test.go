package devstack_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/devcerts"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

func dialBroker(b testenv.Broker, cfg *tls.Config) (*amqp.Connection, error) {
	return amqp.DialConfig(b.URL(), amqp.Config{TLSClientConfig: cfg, Dial: amqp.DefaultDial(5 * time.Second)})
}

func TestBrokerAcceptsMantisUserWithClientCertificate(t *testing.T) {
	t.Parallel()
	b := testenv.RabbitMQ(t)
	conn, err := dialBroker(b, b.TLSConfig(t))
	require.NoError(t, err)
	defer conn.Close()
	ch, err := conn.Channel()
	require.NoError(t, err)
	_, err = ch.QueueDeclare("probe", false, true, false, false, nil)
	require.NoError(t, err)
}

func TestBrokerRefusesClientWithoutCertificate(t *testing.T) {
	t.Parallel()
	b := testenv.RabbitMQ(t)
	cfg := b.TLSConfig(t)
	cfg.Certificates = nil
	_, err := dialBroker(b, cfg)
	require.Error(t, err, "fail_if_no_peer_cert must refuse a client without a certificate")
}

func TestBrokerRefusesCertificateFromAnotherCA(t *testing.T) {
	t.Parallel()
	b := testenv.RabbitMQ(t)
	other, err := devcerts.Generate(t.TempDir(), []string{"localhost"})
	require.NoError(t, err)
	cert, key := other.Pair("client")
	pair, err := tls.LoadX509KeyPair(cert, key)
	require.NoError(t, err)
	cfg := b.TLSConfig(t)
	cfg.Certificates = []tls.Certificate{pair}
	_, err = dialBroker(b, cfg)
	require.Error(t, err)
}

func TestBrokerListensOnlyWithTLS(t *testing.T) {
	t.Parallel()
	b := testenv.RabbitMQ(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	body, err := b.Management(ctx, http.MethodGet, "/overview", nil)
	require.NoError(t, err)
	var overview struct {
		Listeners []struct {
			Protocol string `json:"protocol"`
			IP       string `json:"ip_address"`
			Port     int    `json:"port"`
		} `json:"listeners"`
	}
	require.NoError(t, json.Unmarshal(body, &overview))
	protocols := map[string]bool{}
	for _, l := range overview.Listeners {
		protocols[l.Protocol] = true
		if l.Protocol == "amqp/ssl" {
			require.Equal(t, "127.0.0.1", l.IP, "amqps listens beyond loopback")
		}
	}
	require.True(t, protocols["amqp/ssl"], "amqps listener: %v", protocols)
	require.True(t, protocols["https"], "management over https: %v", protocols)
	require.False(t, protocols["amqp"], "no plain AMQP listener: %v", protocols)
	require.False(t, protocols["http"], "no plain HTTP management listener: %v", protocols)

	// And plain AMQP on the TLS port gets no AMQP handshake.
	conn, err := net.DialTimeout("tcp", fmt.Sprintf("%s:%d", b.Host, b.Port), 5*time.Second)
	require.NoError(t, err)
	defer conn.Close()
	_, err = amqp.Open(conn, amqp.Config{})
	require.Error(t, err)
}

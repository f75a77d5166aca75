package broker

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/tlsconf"
)

// Dial opens a TLS connection to the broker described by the [queue] section,
// verifying the broker against ca_cert_path and presenting the client pair.
func Dial(q config.Queue, name string) (*amqp.Connection, error) {
	conn, _, err := dial(q, name)
	return conn, err
}

// dial is Dial that also returns the connection's writes, which a publisher may hold.
func dial(q config.Queue, name string) (*amqp.Connection, *heldWrites, error) {
	tlsCfg, err := tlsconf.Client(tlsconf.Files{CA: q.CACertPath, Cert: q.ClientCertPath, Key: q.ClientKeyPath}, q.Host)
	if err != nil {
		return nil, nil, fmt.Errorf("queue TLS: %w", err)
	}
	u := url.URL{
		Scheme: "amqps",
		User:   url.UserPassword(q.Username, q.Password),
		Host:   q.Host + ":" + strconv.Itoa(q.Port),
		Path:   "/" + q.VHost,
	}
	// The vhost is one path segment: "/mantis" must travel as %2Fmantis.
	u.RawPath = "/" + url.PathEscape(q.VHost)
	props := amqp.NewConnectionProperties()
	props.SetClientConnectionName(name)
	// The writes are held below TLS: a held batch leaves in one system call, its
	// records side by side.
	var writes *heldWrites
	tcp := amqp.DefaultDial(10 * time.Second)
	conn, err := amqp.DialConfig(u.String(), amqp.Config{
		TLSClientConfig: tlsCfg,
		Properties:      props,
		Heartbeat:       10 * time.Second,
		Dial: func(network, addr string) (net.Conn, error) {
			c, err := tcp(network, addr)
			if err != nil {
				return nil, err
			}
			writes = &heldWrites{Conn: c}
			return writes, nil
		},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("connecting to broker at %s:%d vhost %s: %w", q.Host, q.Port, q.VHost, err)
	}
	return conn, writes, nil
}

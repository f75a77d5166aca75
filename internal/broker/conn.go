package broker

import (
	"fmt"
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
	tlsCfg, err := tlsconf.Client(tlsconf.Files{CA: q.CACertPath, Cert: q.ClientCertPath, Key: q.ClientKeyPath}, q.Host)
	if err != nil {
		return nil, fmt.Errorf("queue TLS: %w", err)
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
	conn, err := amqp.DialConfig(u.String(), amqp.Config{
		TLSClientConfig: tlsCfg,
		Properties:      props,
		Heartbeat:       10 * time.Second,
		Dial:            amqp.DefaultDial(10 * time.Second),
	})
	if err != nil {
		return nil, fmt.Errorf("connecting to broker at %s:%d vhost %s: %w", q.Host, q.Port, q.VHost, err)
	}
	return conn, nil
}

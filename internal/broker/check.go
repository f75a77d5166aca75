package broker

import (
	"context"
	"fmt"

	"github.com/mantis-deploy/mantis/internal/config"
)

// CheckName names the broker's line in check-config --connect.
const CheckName = "rabbitmq"

// CheckConnection is check-config --connect's check of the [queue] section: an AMQPS
// connection, with the configured TLS and user, that opens a channel. It gives up when
// ctx ends and returns what it reached. It is here rather than in internal/cli, beside
// the other checks, so that the agent, which shares cli, does not link the AMQP client.
func CheckConnection(ctx context.Context, q config.Queue, name string) (string, error) {
	done := make(chan error, 1)
	go func() {
		conn, err := Dial(q, name)
		if err != nil {
			done <- err
			return
		}
		defer conn.Close()
		ch, err := conn.Channel()
		if err != nil {
			done <- fmt.Errorf("opening a channel: %w", err)
			return
		}
		done <- ch.Close()
	}()
	select {
	case err := <-done:
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("amqps://%s:%d vhost %s as %s", q.Host, q.Port, q.VHost, q.Username), nil
	case <-ctx.Done():
		return "", fmt.Errorf("connecting to broker at %s:%d: %w", q.Host, q.Port, ctx.Err())
	}
}

package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/mantis-deploy/mantis/internal/config"
)

// Nudge is the message Mandible publishes to mantis.commands for each written command.
// It names the command; the command itself is the command_queue row.
type Nudge struct {
	CommandID          string `json:"command_id"`
	Target             string `json:"target"`
	Mode               string `json:"mode"`
	Priority           string `json:"priority"`
	AssignedInstanceID string `json:"assigned_instance_id,omitempty"`
	// MaxRetries is the per-message retry budget of the seed's Retry Behaviour.
	MaxRetries int `json:"max_retries"`
	// TraceParent is the command's W3C trace context; it travels in the message's
	// headers, not its body.
	TraceParent string `json:"-"`
}

// DecodeNudge parses and checks a nudge body, naming the first bad field.
func DecodeNudge(body []byte) (Nudge, error) {
	var n Nudge
	dec := json.NewDecoder(bytesReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&n); err != nil {
		return Nudge{}, fmt.Errorf("decoding nudge: %w", err)
	}
	// Anything after the nudge is a broken or forged message, not a nudge.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Nudge{}, errors.New("decoding nudge: the body holds more than one JSON value")
	}
	switch {
	case n.CommandID == "":
		return Nudge{}, errors.New("nudge: command_id is required")
	case n.Target == "":
		return Nudge{}, errors.New("nudge: target is required")
	case n.Mode != "poll" && n.Mode != "listen":
		return Nudge{}, fmt.Errorf("nudge: mode must be poll or listen, got %q", n.Mode)
	case n.Priority != "high" && n.Priority != "normal" && n.Priority != "low":
		return Nudge{}, fmt.Errorf("nudge: priority must be high, normal or low, got %q", n.Priority)
	case n.MaxRetries < 0:
		return Nudge{}, fmt.Errorf("nudge: max_retries must not be negative, got %d", n.MaxRetries)
	}
	return n, nil
}

// messagePriority orders messages within a priority queue the way the queues are
// ordered among themselves.
var messagePriority = map[string]uint8{"high": 9, "normal": 5, "low": 1}

// Client is Mandible's broker connection: it declares the topology and publishes
// nudges with publisher confirms, reconnecting when the connection drops.
type Client struct {
	cfg    config.Queue
	name   string
	logger *slog.Logger

	mu     sync.Mutex
	conn   *amqp.Connection
	writes *heldWrites   // conn's writes, held over each batch Publish sends
	ch     *amqp.Channel // publishing channel, in confirm mode
	// restUntil is when publishing may be tried again after a failure: nudges only
	// speed commands up, so while the broker is away a delivery does not wait on it.
	restUntil time.Time
}

// ErrResting is returned by Publish while the client rests after a failed publish.
var ErrResting = errors.New("broker unreachable recently: nudges are skipped for a while, polling claims the commands")

// publishRest is how long publishing rests after a failure.
const publishRest = 10 * time.Second

// PublishTimeout bounds one Publish, connecting and confirms included: a frozen or
// half-dead broker must not hold up a delivery whose rows are already committed.
const PublishTimeout = 5 * time.Second

// NewClient returns a client for the [queue] section; it connects on first use.
func NewClient(cfg config.Queue, name string, logger *slog.Logger) *Client {
	return &Client{cfg: cfg, name: name, logger: logger}
}

// channel returns the confirm-mode publishing channel, connecting when needed.
func (c *Client) channel() (*amqp.Channel, error) {
	if c.ch != nil && !c.ch.IsClosed() && c.conn != nil && !c.conn.IsClosed() {
		return c.ch, nil
	}
	c.closeLocked()
	conn, writes, err := dial(c.cfg, c.name)
	if err != nil {
		return nil, err
	}
	ch, err := conn.Channel()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("opening broker channel: %w", err)
	}
	if err := ch.Confirm(false); err != nil {
		conn.Close()
		return nil, fmt.Errorf("enabling publisher confirms: %w", err)
	}
	c.conn, c.writes, c.ch = conn, writes, ch
	return ch, nil
}

// DeclareTopology declares the seed's topology on a channel of its own (a refused
// declaration closes the channel).
func (c *Client) DeclareTopology(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.channel(); err != nil {
		return err
	}
	ch, err := c.conn.Channel()
	if err != nil {
		return fmt.Errorf("opening broker channel: %w", err)
	}
	defer func() {
		if !ch.IsClosed() {
			ch.Close()
		}
	}()
	return DeclareIn(ch, MantisTopology(), c.cfg.VHost)
}

// Publish sends nudges persistent to mantis.commands with routing key
// command.<mode>.<priority>, and returns once the broker confirmed every one.
func (c *Client) Publish(ctx context.Context, nudges []Nudge) (err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Now().Before(c.restUntil) {
		return ErrResting
	}
	ctx, cancel := context.WithTimeout(ctx, PublishTimeout)
	defer cancel()
	defer func() {
		if err != nil {
			c.restUntil = time.Now().Add(publishRest)
			c.closeLocked()
		}
	}()
	ch, err := c.channel()
	if err != nil {
		return err
	}
	// The batch leaves in as few writes as it fills, not one per nudge.
	c.writes.hold()
	confirms, err := publishAll(ctx, ch, nudges)
	if released := c.writes.release(); err == nil && released != nil {
		err = fmt.Errorf("sending nudges to the broker: %w", released)
	}
	if err != nil {
		c.closeLocked()
		return err
	}
	for i, dc := range confirms {
		ok, err := dc.WaitContext(ctx)
		if err != nil {
			return fmt.Errorf("waiting for broker confirm of %s: %w", nudges[i].CommandID, err)
		}
		if !ok {
			return fmt.Errorf("broker refused nudge for %s", nudges[i].CommandID)
		}
	}
	return nil
}

// publishAll publishes nudges on ch, persistent, and returns their confirmations.
func publishAll(ctx context.Context, ch *amqp.Channel, nudges []Nudge) ([]*amqp.DeferredConfirmation, error) {
	confirms := make([]*amqp.DeferredConfirmation, 0, len(nudges))
	for _, n := range nudges {
		body, err := json.Marshal(n)
		if err != nil {
			return nil, err
		}
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, CommandsExchange, CommandRoutingKey(n.Mode, n.Priority), false, false, amqp.Publishing{
			ContentType:  "application/json",
			DeliveryMode: amqp.Persistent,
			Priority:     messagePriority[n.Priority],
			MessageId:    n.CommandID,
			Type:         "mantis.command.nudge",
			Headers:      nudgeHeaders(n),
			Body:         body,
		})
		if err != nil {
			return nil, fmt.Errorf("publishing nudge for %s: %w", n.CommandID, err)
		}
		confirms = append(confirms, dc)
	}
	return confirms, nil
}

// Ping reports whether the broker is reachable (for /readyz).
func (c *Client) Ping(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := c.channel()
	return err
}

// Close closes the connection.
func (c *Client) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closeLocked()
}

func (c *Client) closeLocked() {
	if c.conn != nil {
		_ = c.conn.Close()
	}
	c.conn, c.writes, c.ch = nil, nil, nil
}

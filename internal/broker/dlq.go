package broker

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/mantis-deploy/mantis/internal/config"
)

// DLQ lets operators inspect, requeue and purge mantis.dlq, which nothing
// consumes. Each call opens a connection of its own: the calls are manual and
// rare, and a call that ends (or whose context ends) leaves nothing behind.
type DLQ struct {
	cfg  config.Queue
	name string
}

// NewDLQ returns the DLQ tools for the [queue] section; name is the connection
// name the broker shows.
func NewDLQ(cfg config.Queue, name string) *DLQ {
	return &DLQ{cfg: cfg, name: name}
}

// DLQMessage is one message of the DLQ.
type DLQMessage struct {
	// Exchange and RoutingKey are where the message was last published: the
	// dead-letter exchange, and the routing key it had on its command queue.
	Exchange    string `json:"exchange"`
	RoutingKey  string `json:"routing_key"`
	MessageID   string `json:"message_id,omitempty"`
	ContentType string `json:"content_type,omitempty"`
	// Body is the message body: text when it is UTF-8, else base64 (see
	// BodyEncoding).
	Body         string `json:"body"`
	BodyEncoding string `json:"body_encoding"`
	// Nudge is the body decoded, when it is a valid nudge; Problem says why
	// it is not.
	Nudge   *Nudge `json:"nudge,omitempty"`
	Problem string `json:"problem,omitempty"`
	// Deaths is the x-death header: why, from where and how often the
	// message was dead-lettered.
	Deaths []Death `json:"deaths"`
	// Headers are all the message's headers, x-death included.
	Headers map[string]any `json:"headers,omitempty"`
}

// DLQListing is what List returns.
type DLQListing struct {
	Queue string `json:"queue"`
	// Depth is how many messages the DLQ held when listed.
	Depth    int          `json:"depth"`
	Messages []DLQMessage `json:"messages"`
}

// session opens a connection and a channel that close when ctx ends or when
// the returned function is called.
func (q *DLQ) session(ctx context.Context) (*amqp.Channel, func(), error) {
	conn, err := Dial(q.cfg, q.name)
	if err != nil {
		return nil, nil, err
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	done := func() {
		stop()
		conn.Close()
	}
	ch, err := conn.Channel()
	if err != nil {
		done()
		return nil, nil, fmt.Errorf("opening broker channel: %w", err)
	}
	return ch, done, nil
}

// depth returns how many messages the DLQ holds, failing when it does not
// exist.
func depth(ch *amqp.Channel) (int, error) {
	q, err := ch.QueueDeclarePassive(DeadLetterQ, true, false, false, false, nil)
	if err != nil {
		var amqpErr *amqp.Error
		if errors.As(err, &amqpErr) && amqpErr.Code == amqp.NotFound {
			return 0, fmt.Errorf("%s does not exist: Mandible declares it at start-up", DeadLetterQ)
		}
		return 0, fmt.Errorf("checking %s: %w", DeadLetterQ, err)
	}
	return q.Messages, nil
}

// List returns up to limit messages from the head of the DLQ, leaving them
// there: each is fetched with basic.get and manual acknowledgement, and all
// are NACKed with requeue once read, which puts them back in place. limit 0
// returns the depth only.
func (q *DLQ) List(ctx context.Context, limit int) (DLQListing, error) {
	ch, done, err := q.session(ctx)
	if err != nil {
		return DLQListing{}, err
	}
	defer done()
	n, err := depth(ch)
	if err != nil {
		return DLQListing{}, err
	}
	out := DLQListing{Queue: DeadLetterQ, Depth: n, Messages: []DLQMessage{}}
	var last uint64
	for len(out.Messages) < limit {
		msg, ok, err := ch.Get(DeadLetterQ, false)
		if err != nil {
			return DLQListing{}, fmt.Errorf("reading %s: %w", DeadLetterQ, err)
		}
		if !ok {
			break
		}
		last = msg.DeliveryTag
		out.Messages = append(out.Messages, dlqMessageOf(msg))
	}
	if last > 0 {
		if err := ch.Nack(last, true, true); err != nil {
			return DLQListing{}, fmt.Errorf("putting listed messages back on %s: %w", DeadLetterQ, err)
		}
	}
	return out, nil
}

func dlqMessageOf(msg amqp.Delivery) DLQMessage {
	d := DLQMessage{
		Exchange:    msg.Exchange,
		RoutingKey:  msg.RoutingKey,
		MessageID:   msg.MessageId,
		ContentType: msg.ContentType,
		Deaths:      Deaths(msg.Headers),
		Headers:     jsonTable(msg.Headers),
	}
	if utf8.Valid(msg.Body) {
		d.Body, d.BodyEncoding = string(msg.Body), "utf-8"
	} else {
		d.Body, d.BodyEncoding = base64.StdEncoding.EncodeToString(msg.Body), "base64"
	}
	if n, err := DecodeNudge(msg.Body); err == nil {
		d.Nudge = &n
	} else {
		d.Problem = err.Error()
	}
	return d
}

// jsonTable turns AMQP header values into values that encode as JSON.
func jsonTable(t amqp.Table) map[string]any {
	if len(t) == 0 {
		return nil
	}
	out := make(map[string]any, len(t))
	for k, v := range t {
		out[k] = jsonValue(v)
	}
	return out
}

func jsonValue(v any) any {
	switch x := v.(type) {
	case amqp.Table:
		return jsonTable(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonValue(e)
		}
		return out
	case []byte:
		if utf8.Valid(x) {
			return string(x)
		}
		return base64.StdEncoding.EncodeToString(x)
	case time.Time:
		return x.UTC().Format(time.RFC3339)
	case amqp.Decimal:
		return fmt.Sprintf("%de-%d", x.Value, x.Scale)
	}
	return v
}

// requeueBatch is how many messages Requeue moves per round of confirms.
const requeueBatch = 100

// Requeue moves up to limit messages from the head of the DLQ to the command
// queue of priority to (0: every message the DLQ held when the call began, so
// that messages dead-lettered again meanwhile are not moved twice). Each is
// published to mantis.commands with routing key command.<mode>.<to> (the
// mode from its body, poll when the body has none), persistent and
// mandatory, with its headers kept (x-death with them, so max_retries still
// bounds it). Messages go in batches: a batch is acknowledged on the DLQ only
// once the broker confirmed and routed every copy, and put back otherwise. A
// batch put back after some copies were routed, or a crash between the
// confirms and the acknowledgement, leaves duplicate nudges, which are
// harmless: the claim in the database runs a command once. It returns how
// many messages it moved.
func (q *DLQ) Requeue(ctx context.Context, to string, limit int) (int, error) {
	if to != "high" && to != "normal" && to != "low" {
		return 0, fmt.Errorf("priority must be high, normal or low, got %q", to)
	}
	ch, done, err := q.session(ctx)
	if err != nil {
		return 0, err
	}
	defer done()
	n, err := depth(ch)
	if err != nil {
		return 0, err
	}
	if limit > 0 {
		n = min(n, limit)
	}
	if err := ch.Confirm(false); err != nil {
		return 0, fmt.Errorf("enabling publisher confirms: %w", err)
	}
	returns := ch.NotifyReturn(make(chan amqp.Return, requeueBatch))
	moved := 0
	for moved < n {
		batch, err := getBatch(ch, min(requeueBatch, n-moved))
		if err != nil || len(batch) == 0 {
			return moved, err
		}
		last := batch[len(batch)-1].DeliveryTag
		if err := publishCopies(ctx, ch, returns, batch, to); err != nil {
			_ = ch.Nack(last, true, true)
			return moved, err
		}
		if err := ch.Ack(last, true); err != nil {
			return moved, fmt.Errorf("acknowledging requeued messages on %s: %w", DeadLetterQ, err)
		}
		moved += len(batch)
	}
	return moved, nil
}

// getBatch takes up to n messages from the head of the DLQ, unacknowledged.
func getBatch(ch *amqp.Channel, n int) ([]amqp.Delivery, error) {
	var batch []amqp.Delivery
	for len(batch) < n {
		msg, ok, err := ch.Get(DeadLetterQ, false)
		if err != nil {
			if len(batch) > 0 {
				_ = ch.Nack(batch[len(batch)-1].DeliveryTag, true, true)
			}
			return nil, fmt.Errorf("reading %s: %w", DeadLetterQ, err)
		}
		if !ok {
			break
		}
		batch = append(batch, msg)
	}
	return batch, nil
}

// publishCopies publishes a copy of each message to mantis.commands for
// priority, mandatory, and waits for the broker's confirms.
func publishCopies(ctx context.Context, ch *amqp.Channel, returns <-chan amqp.Return, batch []amqp.Delivery, priority string) error {
	confirms := make([]*amqp.DeferredConfirmation, len(batch))
	for i, msg := range batch {
		key := CommandRoutingKey(modeOf(msg.Body), priority)
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, CommandsExchange, key, true, false, amqp.Publishing{
			Headers:      msg.Headers,
			ContentType:  msg.ContentType,
			DeliveryMode: amqp.Persistent,
			Priority:     messagePriority[priority],
			MessageId:    msg.MessageId,
			Type:         msg.Type,
			Timestamp:    msg.Timestamp,
			Body:         msg.Body,
		})
		if err != nil {
			return fmt.Errorf("publishing to %s with %s: %w", CommandsExchange, key, err)
		}
		confirms[i] = dc
	}
	for _, dc := range confirms {
		ok, err := dc.WaitContext(ctx)
		if err != nil {
			return fmt.Errorf("waiting for broker confirm: %w", err)
		}
		if !ok {
			return errors.New("broker refused a requeued message")
		}
	}
	// An unroutable mandatory message comes back before its confirm.
	select {
	case r := <-returns:
		return fmt.Errorf("no queue is bound to %s with %s (%s): is the topology declared?", r.Exchange, r.RoutingKey, r.ReplyText)
	default:
	}
	return nil
}

// modeOf reads the mode of a nudge body, poll when it has none.
func modeOf(body []byte) string {
	var n struct {
		Mode string `json:"mode"`
	}
	if json.Unmarshal(body, &n) == nil && (n.Mode == "poll" || n.Mode == "listen") {
		return n.Mode
	}
	return "poll"
}

// Purge empties the DLQ and returns how many messages it dropped.
func (q *DLQ) Purge(ctx context.Context) (int, error) {
	ch, done, err := q.session(ctx)
	if err != nil {
		return 0, err
	}
	defer done()
	n, err := ch.QueuePurge(DeadLetterQ, false)
	if err != nil {
		var amqpErr *amqp.Error
		if errors.As(err, &amqpErr) && amqpErr.Code == amqp.NotFound {
			return 0, fmt.Errorf("%s does not exist: Mandible declares it at start-up", DeadLetterQ)
		}
		return 0, fmt.Errorf("purging %s: %w", DeadLetterQ, err)
	}
	return n, nil
}

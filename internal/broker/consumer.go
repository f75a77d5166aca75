package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/mantis-deploy/mantis/internal/config"
)

// Priorities are the command priorities, highest first: the order the
// priority queues are drained in.
var Priorities = [3]string{"high", "normal", "low"}

// Delivery is a message from one of the command queues.
type Delivery struct {
	amqp.Delivery
	// Priority is the priority of the queue it came from.
	Priority string
}

// Handler processes one delivery and says what becomes of it. The consumer
// calls it from one goroutine, one delivery at a time.
type Handler func(ctx context.Context, d Delivery) Verdict

// ErrTopologyMissing is returned while a command queue does not exist yet:
// Mandible declares the topology, and consumers wait for it.
var ErrTopologyMissing = errors.New("command queue does not exist yet")

// defaultRefillWait bounds how long a lower priority waits for a higher
// priority queue known to hold more messages to deliver the next one.
const defaultRefillWait = time.Second

// ConsumerOptions configures ConsumePriorities.
type ConsumerOptions struct {
	Queue config.Queue
	// Name is the connection name the broker shows.
	Name string
	// TagPrefix names the consumers: TagPrefix-high, TagPrefix-normal,
	// TagPrefix-low.
	TagPrefix string
	// Prefetch is each consumer's limit of unacknowledged messages.
	Prefetch int
	Handler  Handler
	// Consuming, when set, is called once all three consumers are registered.
	Consuming func()
	Logger    *slog.Logger
	// RefillWait overrides defaultRefillWait.
	RefillWait time.Duration
}

// tier is one priority queue's consumer and the deliveries it holds.
type tier struct {
	priority   string
	deliveries <-chan amqp.Delivery
	closed     chan *amqp.Error
	cancelled  chan string
	held       []amqp.Delivery
	// pending is how many of the messages the queue held when consuming
	// began have not arrived yet (plus those requeued since): while it is
	// above zero, the next delivery is on its way, and lower priorities wait
	// for it, up to RefillWait after the queue's last delivery. Messages
	// published later are not counted: they arrive as they come.
	pending  int
	lastSeen time.Time
}

// ConsumePriorities consumes the three command queues over one connection,
// one consumer (and channel) each with manual acknowledgement, until ctx ends
// (it returns nil) or the connection, a channel or a consumer fails (it
// returns why). It never declares anything: a missing queue makes it return
// ErrTopologyMissing.
//
// Deliveries go into one buffer per priority, and a single loop hands them to
// the handler one at a time, always from the highest priority holding one:
// when all three queues have work, high runs before normal before low across
// the consumers, not only within a queue. A handler faster than the broker's
// round trip would empty a buffer before the acknowledgement brings the next
// message, so a queue known to hold more (its depth when consuming began)
// holds lower priorities back until its next delivery arrives, up to
// RefillWait. Prefetch bounds how much lower priority work waits in the
// buffers meanwhile.
func ConsumePriorities(ctx context.Context, o ConsumerOptions) error {
	if o.RefillWait <= 0 {
		o.RefillWait = defaultRefillWait
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	conn, err := Dial(o.Queue, o.Name)
	if err != nil {
		return err
	}
	defer conn.Close()
	connClosed := conn.NotifyClose(make(chan *amqp.Error, 1))

	var tiers [3]*tier
	for i, p := range Priorities {
		t, err := consumeQueue(conn, p, o)
		if err != nil {
			return err
		}
		tiers[i] = t
	}
	if o.Consuming != nil {
		o.Consuming()
	}
	o.Logger.InfoContext(ctx, "consuming command queues", "consumer_tag_prefix", o.TagPrefix, "prefetch", o.Prefetch)

	refill := time.NewTimer(o.RefillWait)
	defer refill.Stop()
	for {
		if err := collect(tiers); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
		next, awaited := pick(tiers, o.RefillWait, time.Now())
		if next == nil {
			var timeout <-chan time.Time
			if awaited != nil {
				refill.Reset(time.Until(awaited.lastSeen.Add(o.RefillWait)))
				timeout = refill.C
			}
			select {
			case <-ctx.Done():
				return nil
			case err := <-connClosed:
				return fmt.Errorf("broker connection closed: %w", closeError(err))
			case <-timeout:
			case d, ok := <-tiers[0].deliveries:
				if err := tiers[0].receive(d, ok); err != nil {
					return err
				}
			case d, ok := <-tiers[1].deliveries:
				if err := tiers[1].receive(d, ok); err != nil {
					return err
				}
			case d, ok := <-tiers[2].deliveries:
				if err := tiers[2].receive(d, ok); err != nil {
					return err
				}
			}
			continue
		}
		d := next.held[0]
		next.held[0] = amqp.Delivery{}
		next.held = next.held[1:]
		v := o.Handler(ctx, Delivery{Delivery: d, Priority: next.priority})
		if err := settle(d, v); err != nil {
			return fmt.Errorf("settling delivery from %s (%s): %w", CommandQueue(next.priority), v, err)
		}
		if v == Requeue {
			// It comes straight back: wait for it like for a refill.
			next.pending++
			next.lastSeen = time.Now()
		}
	}
}

// pick returns the highest priority tier holding a delivery. It returns none
// while a higher tier holds nothing yet but has more on its way (awaited),
// unless that tier has been silent for refillWait: then the messages went to
// other consumers (or expired), and it is not waited for again.
func pick(tiers [3]*tier, refillWait time.Duration, now time.Time) (next, awaited *tier) {
	for _, t := range tiers {
		if len(t.held) > 0 {
			return t, nil
		}
		if t.pending > 0 {
			if now.Before(t.lastSeen.Add(refillWait)) {
				return nil, t
			}
			t.pending = 0
		}
	}
	return nil, nil
}

// consumeQueue opens a channel for one priority queue, checks the queue
// exists, sets the prefetch and starts the consumer.
func consumeQueue(conn *amqp.Connection, priority string, o ConsumerOptions) (*tier, error) {
	name := CommandQueue(priority)
	ch, err := conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("opening broker channel: %w", err)
	}
	q, err := ch.QueueDeclarePassive(name, true, false, false, false, nil)
	if err != nil {
		var amqpErr *amqp.Error
		if errors.As(err, &amqpErr) && amqpErr.Code == amqp.NotFound {
			return nil, fmt.Errorf("%w: %s", ErrTopologyMissing, name)
		}
		return nil, fmt.Errorf("checking queue %s: %w", name, err)
	}
	if err := ch.Qos(o.Prefetch, 0, false); err != nil {
		return nil, fmt.Errorf("setting prefetch on %s: %w", name, err)
	}
	t := &tier{
		priority:  priority,
		closed:    ch.NotifyClose(make(chan *amqp.Error, 1)),
		cancelled: ch.NotifyCancel(make(chan string, 1)),
		pending:   q.Messages,
		lastSeen:  time.Now(),
	}
	t.deliveries, err = ch.Consume(name, o.TagPrefix+"-"+priority, false, false, false, false, nil)
	if err != nil {
		var amqpErr *amqp.Error
		if errors.As(err, &amqpErr) && amqpErr.Code == amqp.NotFound {
			return nil, fmt.Errorf("%w: %s", ErrTopologyMissing, name)
		}
		return nil, fmt.Errorf("consuming %s: %w", name, err)
	}
	return t, nil
}

// collect moves every delivery already received into the tiers' buffers.
func collect(tiers [3]*tier) error {
	for {
		var err error
		select {
		case d, ok := <-tiers[0].deliveries:
			err = tiers[0].receive(d, ok)
		case d, ok := <-tiers[1].deliveries:
			err = tiers[1].receive(d, ok)
		case d, ok := <-tiers[2].deliveries:
			err = tiers[2].receive(d, ok)
		default:
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// receive buffers a delivery; a closed delivery channel means the channel,
// the connection or the consumer ended.
func (t *tier) receive(d amqp.Delivery, ok bool) error {
	if ok {
		t.held = append(t.held, d)
		t.pending = max(t.pending-1, 0)
		t.lastSeen = time.Now()
		return nil
	}
	queue := CommandQueue(t.priority)
	select {
	case tag := <-t.cancelled:
		return fmt.Errorf("broker cancelled consumer %s of %s (queue deleted?)", tag, queue)
	default:
	}
	select {
	case err := <-t.closed:
		return fmt.Errorf("channel of %s closed: %w", queue, closeError(err))
	default:
	}
	return fmt.Errorf("consumer of %s stopped", queue)
}

func closeError(err *amqp.Error) error {
	if err == nil {
		return amqp.ErrClosed
	}
	return err
}

func settle(d amqp.Delivery, v Verdict) error {
	switch v {
	case Ack:
		return d.Ack(false)
	case Requeue:
		return d.Nack(false, true)
	case DeadLetter:
		return d.Nack(false, false)
	}
	return nil
}

package broker

import (
	"context"
	"errors"
	"log/slog"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Verdict is what becomes of a delivery once its handler is done with it.
type Verdict int

const (
	// Ack: processed; the broker forgets the message.
	Ack Verdict = iota
	// Requeue: NACK with requeue; the message re-enters its queue at once,
	// marked redelivered.
	Requeue
	// DeadLetter: NACK without requeue; the queue dead-letters the message
	// through mantis.dlx to mantis.dlq.
	DeadLetter
	// Leave: neither; the consumer is stopping, and the broker requeues the
	// message when the channel closes.
	Leave
)

func (v Verdict) String() string {
	switch v {
	case Ack:
		return "ack"
	case Requeue:
		return "nack requeue=true"
	case DeadLetter:
		return "nack requeue=false"
	case Leave:
		return "left unacknowledged"
	}
	return "unknown verdict"
}

// Death is one entry of a message's x-death header: the broker adds one per
// queue and reason the message was dead-lettered from, and counts repeats.
type Death struct {
	Queue       string    `json:"queue"`
	Reason      string    `json:"reason"`
	Count       int64     `json:"count"`
	Exchange    string    `json:"exchange,omitempty"`
	RoutingKeys []string  `json:"routing_keys,omitempty"`
	Time        time.Time `json:"time,omitzero"`
}

// Deaths parses the x-death header; entries it cannot read are skipped.
func Deaths(headers amqp.Table) []Death {
	entries, _ := headers["x-death"].([]any)
	out := make([]Death, 0, len(entries))
	for _, e := range entries {
		t, ok := e.(amqp.Table)
		if !ok {
			continue
		}
		d := Death{Count: toInt64(t["count"])}
		d.Queue, _ = t["queue"].(string)
		d.Reason, _ = t["reason"].(string)
		d.Exchange, _ = t["exchange"].(string)
		d.Time, _ = t["time"].(time.Time)
		keys, _ := t["routing-keys"].([]any)
		for _, k := range keys {
			if s, ok := k.(string); ok {
				d.RoutingKeys = append(d.RoutingKeys, s)
			}
		}
		out = append(out, d)
	}
	return out
}

// DeathCount is how many times a message was dead-lettered: the counts of
// every x-death entry added up. Command queues never dead-letter into one
// another, so a count above zero means the message went through mantis.dlq
// and was requeued from it (which keeps its headers).
func DeathCount(headers amqp.Table) int64 {
	var n int64
	for _, d := range Deaths(headers) {
		n += d.Count
	}
	return n
}

func toInt64(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case int32:
		return int64(n)
	case int16:
		return int64(n)
	case int8:
		return int64(n)
	case int:
		return int64(n)
	case uint8:
		return int64(n)
	case uint16:
		return int64(n)
	case uint32:
		return int64(n)
	}
	return 0
}

// The seed's Retry Behaviour, as two decisions: one before processing and
// one after a failed attempt. A command message gets one broker-level retry;
// everything beyond it is Mandible's to schedule.

// SpentOnArrival reports whether a message goes to the DLQ unprocessed: its
// max_retries is above 0 and its x-death count already meets it. At
// max_retries 0 the check does not apply.
func SpentOnArrival(deaths int64, maxRetries int) bool {
	return maxRetries > 0 && deaths >= int64(maxRetries)
}

// AfterFailure is the verdict on a failed processing attempt: the first
// failure of a message is requeued once (its free retry); a redelivered
// message has spent it, and max_retries 0 never had it, so both are
// dead-lettered.
func AfterFailure(redelivered bool, maxRetries int) Verdict {
	if maxRetries == 0 || redelivered {
		return DeadLetter
	}
	return Requeue
}

// ErrUnprocessable marks a nudge no attempt can process (it names no command,
// or one that does not exist): it is dead-lettered at once, without the
// retry rules.
var ErrUnprocessable = errors.New("nudge cannot be processed")

// ErrBusy marks a nudge its consumer cannot take now (at capacity, or
// draining). It is not a processing failure, so it spends no retry: the nudge
// is acknowledged. The command_queue row is the command and the nudge only a
// hint; polling claims the row once there is room, here or at another
// instance, and Mandible's delivery_timeout covers a row nobody claims. A
// requeue instead would come straight back to the same busy consumer, and
// come back marked redelivered, so that its next failure would be its last.
var ErrBusy = errors.New("consumer cannot take the command now")

// NudgeProcessor does the work a command nudge asks for.
type NudgeProcessor interface {
	// Process handles one nudge. nil means done (ACK); an error wrapping
	// ErrBusy is acknowledged too, with a log line; one wrapping
	// ErrUnprocessable dead-letters the message at once; any other error is
	// a failed attempt under the retry rules.
	Process(ctx context.Context, n Nudge) error
	// GiveUp is called before a failed nudge is dead-lettered for good (a
	// redelivered message failing again, or any failure at max_retries 0),
	// so that the command's owner can be asked to dispatch it again.
	GiveUp(ctx context.Context, n Nudge, cause error)
}

// NudgeHandler returns the Handler of command nudges: it decodes the body,
// applies the retry rules around p and decides the verdict. A malformed
// message is dead-lettered with a log line; the consumer goes on.
func NudgeHandler(p NudgeProcessor, logger *slog.Logger) Handler {
	return func(ctx context.Context, d Delivery) Verdict {
		n, err := DecodeNudge(d.Body)
		if err != nil {
			logger.WarnContext(ctx, "dead-lettering malformed nudge",
				"queue", CommandQueue(d.Priority), "message_id", d.MessageId, "err", err)
			return DeadLetter
		}
		deaths := DeathCount(d.Headers)
		attrs := []any{"command_id", n.CommandID, "queue", CommandQueue(d.Priority),
			"redelivered", d.Redelivered, "deaths", deaths, "max_retries", n.MaxRetries}
		if SpentOnArrival(deaths, n.MaxRetries) {
			logger.WarnContext(ctx, "dead-lettering nudge unprocessed: its x-death count meets max_retries", attrs...)
			return DeadLetter
		}
		logger.DebugContext(ctx, "processing nudge", attrs...)
		n.TraceParent = traceParentHeader(d.Headers)
		ctx, span := startNudgeSpan(ctx, d, n)
		defer span.End()
		err = p.Process(ctx, n)
		switch {
		case err == nil:
			return Ack
		case errors.Is(err, ErrBusy):
			logger.InfoContext(ctx, "consumer busy: acknowledging nudge, polling claims the command", append(attrs, "err", err)...)
			return Ack
		case errors.Is(err, ErrUnprocessable):
			logger.WarnContext(ctx, "dead-lettering nudge that cannot be processed", append(attrs, "err", err)...)
			return DeadLetter
		case ctx.Err() != nil:
			// Stopping: the broker requeues the message for the next consumer.
			return Leave
		}
		v := AfterFailure(d.Redelivered, n.MaxRetries)
		if v == Requeue {
			logger.InfoContext(ctx, "nudge processing failed: requeued for its one broker retry", append(attrs, "err", err)...)
			return Requeue
		}
		p.GiveUp(ctx, n, err)
		logger.WarnContext(ctx, "nudge processing failed for good: dead-lettered", append(attrs, "err", err)...)
		return DeadLetter
	}
}

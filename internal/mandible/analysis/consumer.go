package analysis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/mantis-deploy/mantis/internal/backoff"
	"github.com/mantis-deploy/mantis/internal/broker"
	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/schema"
)

// Consumer settings for mantis.analysis.requests.
const (
	// ConsumerConnectionName is the broker connection's name, as the management UI shows it.
	ConsumerConnectionName = "mandible analysis consumer"
	// Prefetch is how many unacknowledged requests the broker hands the consumer at once.
	Prefetch = 10
	// MaxRequestIDLength bounds a request_id.
	MaxRequestIDLength = 200

	reconnectMin = 500 * time.Millisecond
	reconnectMax = 30 * time.Second
)

// Request is a message on mantis.analysis.requests: the output of a failed command an
// external component wants explained. Its result is read back with
// schema.AnalysisByExternalID(request_id); reply_to is accepted and ignored.
type Request struct {
	RequestID string
	Output    string
	ExitCode  int
	TimedOut  bool
}

// DecodeRequest parses and checks a request body. request_id and output are required
// (output may be empty); request_id is at most MaxRequestIDLength characters without
// control characters.
func DecodeRequest(body []byte) (Request, error) {
	var m struct {
		RequestID *string `json:"request_id"`
		Output    *string `json:"output"`
		ExitCode  int     `json:"exit_code"`
		TimedOut  bool    `json:"timed_out"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		return Request{}, fmt.Errorf("decoding analysis request: %w", err)
	}
	switch {
	case m.RequestID == nil || strings.TrimSpace(*m.RequestID) == "":
		return Request{}, errors.New("analysis request: request_id is required")
	case len(*m.RequestID) > MaxRequestIDLength:
		return Request{}, fmt.Errorf("analysis request: request_id must be at most %d characters, got %d", MaxRequestIDLength, len(*m.RequestID))
	case strings.ContainsFunc(*m.RequestID, unicode.IsControl):
		return Request{}, errors.New("analysis request: request_id must not contain control characters")
	case m.Output == nil:
		return Request{}, errors.New("analysis request: output is required")
	}
	// PostgreSQL text holds no NUL; the rest of the output is kept as sent.
	return Request{RequestID: *m.RequestID, Output: strings.ReplaceAll(*m.Output, "\x00", ""), ExitCode: m.ExitCode, TimedOut: m.TimedOut}, nil
}

// Consume serves mantis.analysis.requests until ctx ends, returning nil then. Each
// request is classified and stored as a queued external analysis (idempotently: a
// redelivered request_id is stored once), then acknowledged, and p is woken to finish
// it. A malformed message is rejected without requeue, so the broker dead-letters it
// to mantis.dlq through mantis.dlx. When the broker goes away, or the queue is not
// declared yet, Consume reconnects with jittered backoff.
func Consume(ctx context.Context, cfg config.Queue, p *Processor) error {
	wait := backoff.Backoff{Min: reconnectMin, Max: reconnectMax}
	for {
		connected, err := consumeOnce(ctx, cfg, p)
		if ctx.Err() != nil {
			return nil
		}
		if connected {
			wait.Reset()
		}
		d := wait.Next()
		p.Logger.WarnContext(ctx, "analysis consumer disconnected, reconnecting", "err", err, "retry_in", d)
		if !backoff.Sleep(ctx, d) {
			return nil
		}
	}
}

// consumeOnce consumes on one connection until it fails or ctx ends; connected says
// whether it got as far as consuming.
func consumeOnce(ctx context.Context, cfg config.Queue, p *Processor) (connected bool, err error) {
	conn, err := broker.Dial(cfg, ConsumerConnectionName)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	closed := conn.NotifyClose(make(chan *amqp.Error, 1))
	ch, err := conn.Channel()
	if err != nil {
		return false, fmt.Errorf("opening broker channel: %w", err)
	}
	if err := ch.Qos(Prefetch, 0, false); err != nil {
		return false, fmt.Errorf("setting prefetch: %w", err)
	}
	tag := "mandible-analysis-" + uuid.NewString()
	deliveries, err := ch.ConsumeWithContext(ctx, broker.AnalysisQueue, tag, false, false, false, false, nil)
	if err != nil {
		return false, fmt.Errorf("consuming %s: %w", broker.AnalysisQueue, err)
	}
	p.Logger.InfoContext(ctx, "consuming analysis requests", "queue", broker.AnalysisQueue, "consumer_tag", tag)
	for {
		select {
		case <-ctx.Done():
			return true, nil
		case d, ok := <-deliveries:
			if !ok {
				select {
				case e := <-closed:
					if e != nil {
						return true, fmt.Errorf("broker connection closed: %w", e)
					}
					return true, errors.New("broker connection closed")
				default:
					return true, errors.New("broker closed the consumer")
				}
			}
			if err := handle(ctx, p, d); err != nil {
				return true, err
			}
		}
	}
}

// handle stores one delivery and settles it. An error means the delivery was handed
// back for a later attempt and the connection should be dropped.
func handle(ctx context.Context, p *Processor, d amqp.Delivery) error {
	req, err := DecodeRequest(d.Body)
	if err != nil {
		p.Logger.WarnContext(ctx, "rejected malformed analysis request", "err", err,
			"message_id", d.MessageId, "body_bytes", len(d.Body), "dead_letter_exchange", broker.DeadLetterExch)
		if err := d.Nack(false, false); err != nil {
			return fmt.Errorf("rejecting malformed analysis request: %w", err)
		}
		return nil
	}
	res := Classify(req.Output, req.ExitCode, req.TimedOut)
	created, err := schema.InsertExternalAnalysis(ctx, p.DB, schema.NewExternalAnalysis{
		ExternalID: req.RequestID,
		Input:      req.Output,
		Category:   res.Category,
		Summary:    res.Summary,
		Suggestion: res.Suggestion,
	})
	if err != nil {
		if permanent(err) {
			p.Logger.ErrorContext(ctx, "rejected analysis request the database refuses", "request_id", req.RequestID, "err", err)
			if err := d.Nack(false, false); err != nil {
				return fmt.Errorf("rejecting analysis request %s: %w", req.RequestID, err)
			}
			return nil
		}
		// The database is unavailable: hand the request back and come back after a
		// backoff, rather than bounce it off the broker at full speed.
		_ = d.Nack(false, true)
		return err
	}
	if err := d.Ack(false); err != nil {
		// Unacknowledged, it is delivered again; the insert is idempotent.
		return fmt.Errorf("acknowledging analysis request %s: %w", req.RequestID, err)
	}
	p.Logger.InfoContext(ctx, "queued analysis request", "request_id", req.RequestID, "created", created, "category", res.Category)
	if created {
		p.Wake()
	}
	return nil
}

// permanent reports whether the database refused the data itself (SQLSTATE classes 22,
// data exception, and 23, integrity constraint violation): retrying cannot help.
func permanent(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (strings.HasPrefix(pgErr.Code, "22") || strings.HasPrefix(pgErr.Code, "23"))
}

// Package broker is Mantis's RabbitMQ adapter: the topology Mandible declares (seed
// "Queue Topology", exactly), TLS connections, and the publisher of command nudges.
// The broker carries nudges only; the database row is the command.
package broker

import (
	"errors"
	"fmt"
	"strings"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Exchange, queue and routing-key names of the seed.
const (
	CommandsExchange = "mantis.commands"
	AnalysisExchange = "mantis.analysis"
	DeadLetterExch   = "mantis.dlx"

	HighQueue     = "mantis.commands.priority.high"
	NormalQueue   = "mantis.commands.priority.normal"
	LowQueue      = "mantis.commands.priority.low"
	AnalysisQueue = "mantis.analysis.requests"
	DeadLetterQ   = "mantis.dlq"

	AnalysisRoutingKey = "analysis.request"
)

// CommandQueue returns the command queue of a priority (high, normal or low).
func CommandQueue(priority string) string { return "mantis.commands.priority." + priority }

// CommandRoutingKey is the routing key of a command: command.<poll|listen>.<priority>.
func CommandRoutingKey(mode, priority string) string { return "command." + mode + "." + priority }

// Exchange is one exchange to declare.
type Exchange struct {
	Name, Kind string
}

// Queue is one queue to declare, with its arguments.
type Queue struct {
	Name string
	Args amqp.Table
}

// Binding binds a queue to an exchange with a routing key.
type Binding struct {
	Exchange, Queue, Key string
}

// Topology is everything Mandible declares.
type Topology struct {
	Exchanges []Exchange
	Queues    []Queue
	Bindings  []Binding
}

// Message TTLs of the seed, in milliseconds.
const (
	ttlHigh     = 1_800_000   // 30 min
	ttlNormal   = 3_600_000   // 1 h
	ttlLow      = 7_200_000   // 2 h
	ttlAnalysis = 14_400_000  // 4 h
	ttlDLQ      = 604_800_000 // 7 days
)

// MantisTopology is the seed's topology: three exchanges, five durable queues and
// eight bindings. The command queues are classic priority queues (x-max-priority 10,
// named x-queue-type classic so a broker default of quorum does not reach them).
func MantisTopology() Topology {
	command := func(name string, ttl int) Queue {
		return Queue{Name: name, Args: amqp.Table{
			"x-message-ttl":          int32(ttl),
			"x-dead-letter-exchange": DeadLetterExch,
			"x-max-priority":         int32(10),
			"x-queue-type":           "classic",
		}}
	}
	t := Topology{
		Exchanges: []Exchange{
			{CommandsExchange, amqp.ExchangeDirect},
			{AnalysisExchange, amqp.ExchangeDirect},
			{DeadLetterExch, amqp.ExchangeFanout},
		},
		Queues: []Queue{
			command(HighQueue, ttlHigh),
			command(NormalQueue, ttlNormal),
			command(LowQueue, ttlLow),
			{Name: AnalysisQueue, Args: amqp.Table{"x-message-ttl": int32(ttlAnalysis), "x-dead-letter-exchange": DeadLetterExch}},
			// The DLQ is where dead-lettering ends: no dead-letter exchange of its own.
			{Name: DeadLetterQ, Args: amqp.Table{"x-message-ttl": int32(ttlDLQ)}},
		},
	}
	for _, prio := range []string{"high", "normal", "low"} {
		for _, mode := range []string{"poll", "listen"} {
			t.Bindings = append(t.Bindings, Binding{CommandsExchange, CommandQueue(prio), CommandRoutingKey(mode, prio)})
		}
	}
	t.Bindings = append(t.Bindings,
		Binding{AnalysisExchange, AnalysisQueue, AnalysisRoutingKey},
		// mantis.dlx is a fanout: its binding carries an empty routing key.
		Binding{DeadLetterExch, DeadLetterQ, ""},
	)
	return t
}

// PreconditionError is the broker refusing a declaration because the queue exists
// with other arguments (a quorum queue, or one a policy converted).
type PreconditionError struct {
	Queue string
	// VHost is the virtual host the queue lives in, named by the recovery steps.
	VHost string
	Err   *amqp.Error
}

// RecoverySteps is the seed's recovery procedure for PRECONDITION_FAILED, for the
// virtual host vhost.
func RecoverySteps(vhost string) string {
	return strings.ReplaceAll(recoverySteps, "{vhost}", shellQuote(vhost))
}

// shellQuote quotes s for a POSIX shell when it holds anything but safe characters.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/-_.") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

const recoverySteps = `The command queues must stay classic: queue arguments are immutable, so a queue that
already exists as quorum (or was converted by a policy) cannot be re-declared.
To recover, remove the policy (or the broker default), delete the three command queues -
they hold only broker copies: every command is a row in command_queue, which Thorax's
polling service claims through FetchPendingCommands whether or not a broker message
ever arrives - and restart Mandible, which re-declares them classic:

  rabbitmqctl -p {vhost} clear_policy <policy-name>   # if a policy converted them
  for p in high normal low; do
    rabbitmqctl -p {vhost} delete_queue "mantis.commands.priority.$p"
  done`

func (e *PreconditionError) Error() string {
	return fmt.Sprintf("declaring queue %s in vhost %s: %s\n%s", e.Queue, e.VHost, e.Err.Error(), RecoverySteps(e.VHost))
}

func (e *PreconditionError) Unwrap() error { return e.Err }

// Declare declares t on ch: exchanges, queues with their arguments, bindings. It is
// idempotent. A queue that exists with other arguments yields *PreconditionError; the
// channel is closed by the broker then. It never deletes anything. The error names
// the default vhost, /mantis; DeclareIn names another.
func Declare(ch *amqp.Channel, t Topology) error { return DeclareIn(ch, t, defaultVHost) }

// defaultVHost is the seed's virtual host.
const defaultVHost = "/mantis"

// DeclareIn is Declare on a channel of the virtual host vhost, which a refusal's
// recovery steps name.
func DeclareIn(ch *amqp.Channel, t Topology, vhost string) error {
	for _, x := range t.Exchanges {
		if err := ch.ExchangeDeclare(x.Name, x.Kind, true, false, false, false, nil); err != nil {
			return fmt.Errorf("declaring exchange %s: %w", x.Name, err)
		}
	}
	for _, q := range t.Queues {
		if _, err := ch.QueueDeclare(q.Name, true, false, false, false, q.Args); err != nil {
			var amqpErr *amqp.Error
			if errors.As(err, &amqpErr) && amqpErr.Code == amqp.PreconditionFailed {
				return &PreconditionError{Queue: q.Name, VHost: vhost, Err: amqpErr}
			}
			return fmt.Errorf("declaring queue %s: %w", q.Name, err)
		}
	}
	for _, b := range t.Bindings {
		if err := ch.QueueBind(b.Queue, b.Key, b.Exchange, false, nil); err != nil {
			return fmt.Errorf("binding %s to %s with %q: %w", b.Queue, b.Exchange, b.Key, err)
		}
	}
	return nil
}

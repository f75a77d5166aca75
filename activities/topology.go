package activities

import (
	"context"
	"errors"

	"go.temporal.io/sdk/temporal"

	"github.com/mantis-deploy/mantis/internal/broker"
)

// Broker is Mandible's RabbitMQ client.
type Broker interface {
	DeclareTopology(ctx context.Context) error
	Publish(ctx context.Context, nudges []broker.Nudge) error
}

// DeclareTopologyResult lists what was declared, for the Web UI.
type DeclareTopologyResult struct {
	Exchanges []string `json:"exchanges"`
	Queues    []string `json:"queues"`
	Bindings  int      `json:"bindings"`
}

// DeclareTopology declares the seed's RabbitMQ topology (idempotent). A queue that
// exists with other arguments fails the activity with a non-retryable
// TopologyPreconditionFailed error carrying the broker's message and the recovery
// steps.
func (a *Activities) DeclareTopology(ctx context.Context) (DeclareTopologyResult, error) {
	if a.Broker == nil {
		return DeclareTopologyResult{}, temporal.NewNonRetryableApplicationError("no broker configured ([queue] enabled = false)", NoBroker, nil)
	}
	if err := a.Broker.DeclareTopology(ctx); err != nil {
		var pre *broker.PreconditionError
		if errors.As(err, &pre) {
			return DeclareTopologyResult{}, temporal.NewNonRetryableApplicationError(err.Error(), TopologyPreconditionFailed, nil)
		}
		return DeclareTopologyResult{}, err
	}
	t := broker.MantisTopology()
	res := DeclareTopologyResult{Bindings: len(t.Bindings)}
	for _, x := range t.Exchanges {
		res.Exchanges = append(res.Exchanges, x.Name)
	}
	for _, q := range t.Queues {
		res.Queues = append(res.Queues, q.Name)
	}
	return res, nil
}

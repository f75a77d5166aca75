package activities

import (
	"context"
	"errors"

	"go.temporal.io/sdk/temporal"

	"github.com/mantis-deploy/mantis/internal/broker"
	"github.com/mantis-deploy/mantis/internal/contract/activityio"
)

// Broker is Mandible's RabbitMQ client.
type Broker interface {
	DeclareTopology(ctx context.Context) error
	Publish(ctx context.Context, nudges []broker.Nudge) error
}

// DeclareTopology declares the seed's RabbitMQ topology (idempotent). A queue that
// exists with other arguments fails the activity with a non-retryable
// TopologyPreconditionFailed error carrying the broker's message and the recovery
// steps.
func (a *Activities) DeclareTopology(ctx context.Context) (activityio.DeclareTopologyResult, error) {
	if a.Broker == nil {
		return activityio.DeclareTopologyResult{}, temporal.NewNonRetryableApplicationError("no broker configured ([queue] enabled = false)", activityio.NoBroker, nil)
	}
	if err := a.Broker.DeclareTopology(ctx); err != nil {
		var pre *broker.PreconditionError
		if errors.As(err, &pre) {
			return activityio.DeclareTopologyResult{}, temporal.NewNonRetryableApplicationError(err.Error(), activityio.TopologyPreconditionFailed, nil)
		}
		return activityio.DeclareTopologyResult{}, err
	}
	t := broker.MantisTopology()
	res := activityio.DeclareTopologyResult{Bindings: len(t.Bindings)}
	for _, x := range t.Exchanges {
		res.Exchanges = append(res.Exchanges, x.Name)
	}
	for _, q := range t.Queues {
		res.Queues = append(res.Queues, q.Name)
	}
	return res, nil
}

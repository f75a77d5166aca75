package activities

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/temporal"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/schema"
)

// Frozen is the error type of a StartDeployment that an active freeze window refused:
// a deployment started from any Temporal client (a schedule, the temporal CLI) is
// held to the freezes as one created through the API is.
const Frozen = "Frozen"

// refuseFrozen fails deployment id, not yet started, when a freeze active now
// matches some of its targets and nobody with an admin token overrode it at
// creation. A deployment already running (a retried start) is not refused.
func (a *Activities) refuseFrozen(ctx context.Context, id uuid.UUID, targets []string) error {
	mayRefuse, err := schema.FreezeMayRefuse(ctx, a.DB, id)
	if err != nil || !mayRefuse {
		return err
	}
	blocking, err := schema.BlockingFreezes(ctx, a.DB, targets, time.Now())
	if err != nil || len(blocking) == 0 {
		return err
	}
	names := make([]string, len(blocking))
	for i, f := range blocking {
		names[i] = fmt.Sprintf("%q (%s)", f.Name, f.Reason)
	}
	reason := "refused by active freeze " + strings.Join(names, ", ")
	if _, err := schema.FinishDeployment(ctx, a.DB, id, domain.DeploymentFailed, reason); err != nil {
		return err
	}
	if a.Logger != nil {
		a.Logger.WarnContext(ctx, "deployment refused by freeze", "deployment_id", id, "freezes", len(blocking))
	}
	return temporal.NewNonRetryableApplicationError(reason, Frozen, nil)
}

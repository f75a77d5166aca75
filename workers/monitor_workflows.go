package workers

import (
	"context"
	"errors"
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/mantis-deploy/mantis/schema"
	"github.com/mantis-deploy/mantis/workflows"
)

// noticesPerTick bounds how many failed deployments' workflows one tick tells.
const noticesPerTick = 50

// tellWorkflows cancels the workflows of deployments failed outside them (their
// Thorax died). A cancelled Deployment workflow stops dispatching, cancels what it
// still has queued or running, and ends with the status the database already holds,
// so the database and the workflow agree. A notice stays until its workflow was
// told or is found ended.
func (m *Monitor) tellWorkflows(ctx context.Context) {
	notices, err := schema.WorkflowNotices(ctx, m.opts.DB, noticesPerTick)
	if err != nil {
		m.opts.Logger.WarnContext(ctx, "reading workflow notices failed", "err", err)
		return
	}
	for _, n := range notices {
		if err := m.cancelDeploymentWorkflows(ctx, n); err != nil {
			m.opts.Logger.WarnContext(ctx, "telling a failed deployment's workflow failed; retrying next tick",
				"deployment_id", n.DeploymentID, "attempts", n.Attempts, "err", err)
			continue
		}
		if err := schema.DeleteWorkflowNotice(ctx, m.opts.DB, n.DeploymentID); err != nil {
			m.opts.Logger.WarnContext(ctx, "deleting workflow notice failed", "deployment_id", n.DeploymentID, "err", err)
			continue
		}
		m.opts.Logger.InfoContext(ctx, "told a failed deployment's workflow to stop", "deployment_id", n.DeploymentID, "reason", n.Reason)
	}
}

// cancelDeploymentWorkflows requests cancellation of the deployment's running
// workflow: deployment:<id>, or, for one started by another Temporal client under an
// id of its own, the running workflow whose MantisDeploymentID is the deployment.
func (m *Monitor) cancelDeploymentWorkflows(ctx context.Context, n schema.WorkflowNotice) error {
	reason := "mantis: " + n.Reason
	err := m.requestCancel(ctx, workflows.DeploymentWorkflowID(n.DeploymentID.String()), reason)
	var notFound *serviceerror.NotFound
	if !errors.As(err, &notFound) {
		return err
	}
	resp, err := m.opts.Temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Namespace: m.opts.Namespace,
		Query: fmt.Sprintf("%s = '%s' AND ExecutionStatus = 'Running'",
			workflows.DeploymentIDSearchAttribute.GetName(), n.DeploymentID),
	})
	if err != nil {
		return fmt.Errorf("finding the workflow of deployment %s: %w", n.DeploymentID, err)
	}
	for _, e := range resp.GetExecutions() {
		if err := m.requestCancel(ctx, e.GetExecution().GetWorkflowId(), reason); err != nil && !errors.As(err, &notFound) {
			return err
		}
	}
	return nil
}

func (m *Monitor) requestCancel(ctx context.Context, workflowID, reason string) error {
	_, err := m.opts.Temporal.WorkflowService().RequestCancelWorkflowExecution(ctx, &workflowservice.RequestCancelWorkflowExecutionRequest{
		Namespace:         m.opts.Namespace,
		WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: workflowID},
		Identity:          "mandible " + m.opts.ReplicaID,
		Reason:            reason,
	})
	return err
}

// endGoneReplicas terminates the dispatcher workflows of replicas silent past half
// of processing_timeout. Cancelling would not do: a cancel is a task on the gone
// replica's own task queue, which nobody polls. The reason shows in the Web UI. The
// gone replica's claims are reclaimed by the dispatch maintenance as before; should
// it come back, its supervisor starts its dispatcher again.
func (m *Monitor) endGoneReplicas(ctx context.Context) {
	goneAfter := m.opts.ProcessingTimeout / 2
	gone, err := schema.GoneReplicas(ctx, m.opts.DB, m.opts.ReplicaID, goneAfter)
	if err != nil {
		m.opts.Logger.WarnContext(ctx, "listing gone replicas failed", "err", err)
		return
	}
	for _, r := range gone {
		reason := fmt.Sprintf("mantis: replica %s silent since %s, longer than %s (half of dispatch.processing_timeout); ended by replica %s",
			r.ID, r.LastSeenAt.UTC().Format("2006-01-02T15:04:05Z"), goneAfter, m.opts.ReplicaID)
		err := m.opts.Temporal.TerminateWorkflow(ctx, workflows.DispatcherWorkflowID(r.ID), "", reason)
		var notFound *serviceerror.NotFound
		if err != nil && !errors.As(err, &notFound) {
			m.opts.Logger.WarnContext(ctx, "ending a gone replica's dispatcher failed", "replica_id", r.ID, "err", err)
			continue
		}
		ended, err := schema.EndReplica(ctx, m.opts.DB, r.ID, m.opts.ReplicaID, reason, goneAfter)
		if err != nil {
			m.opts.Logger.WarnContext(ctx, "recording a gone replica failed", "replica_id", r.ID, "err", err)
			continue
		}
		if ended {
			m.opts.Logger.WarnContext(ctx, "replica gone: ended its dispatcher workflow",
				"replica_id", r.ID, "last_seen_at", r.LastSeenAt, "workflow_id", workflows.DispatcherWorkflowID(r.ID))
		}
	}
}

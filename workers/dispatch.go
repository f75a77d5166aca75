// Package workers starts Mantis's worker pools. This file starts a Mandible replica's
// Temporal worker with its dispatcher, and wakes that dispatcher when new dispatch
// requests are notified on schema.DispatchRequestsChannel.
package workers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/mantis-deploy/mantis/activities"
	"github.com/mantis-deploy/mantis/internal/backoff"
	"github.com/mantis-deploy/mantis/internal/contract/activityio"
	"github.com/mantis-deploy/mantis/schema"
	"github.com/mantis-deploy/mantis/workflows"
)

// DispatchOptions configures a replica's dispatch worker.
type DispatchOptions struct {
	Client    client.Client
	Namespace string
	DB        *pgxpool.Pool
	ReplicaID string
	Input     workflows.DispatcherInput
	Logger    *slog.Logger
	// Wakes is the coalescer the replica's claim activity updates.
	Wakes *activities.WakeCoalescer
}

// StartReplicaWorker starts the replica's Temporal worker on its own task queue, with
// the workflows and activities that must run on the replica itself (the dispatcher,
// the topology declaration). Stop it when the replica stops.
func StartReplicaWorker(c client.Client, replica string, acts *activities.Activities) (worker.Worker, error) {
	queue := workflows.ReplicaTaskQueue(replica)
	setBinaryID()
	w := worker.New(c, queue, worker.Options{})
	registerReplicaWorkflows(w)
	w.RegisterActivityWithOptions(acts, activity.RegisterOptions{})
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("starting Temporal worker on %s: %w", queue, err)
	}
	return w, nil
}

// StartDeploymentWorker starts the worker every replica runs on the shared deployment
// task queue: Deployment workflows and their activities, on whichever replica is free.
func StartDeploymentWorker(c client.Client, queue string, acts *activities.Activities) (worker.Worker, error) {
	setBinaryID()
	w := worker.New(c, queue, worker.Options{})
	registerDeploymentWorkflows(w)
	w.RegisterActivityWithOptions(acts, activity.RegisterOptions{})
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("starting Temporal worker on %s: %w", queue, err)
	}
	return w, nil
}

// RegisterWorkflows registers every workflow Mandible's workers run, under the type
// names they run it with, on r: a replayer that checks histories against this
// binary's code registers exactly what the workers do.
func RegisterWorkflows(r worker.WorkflowRegistry) {
	registerReplicaWorkflows(r)
	registerDeploymentWorkflows(r)
}

// registerReplicaWorkflows registers what runs on a replica's own task queue.
func registerReplicaWorkflows(r worker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(workflows.Dispatcher, workflow.RegisterOptions{Name: workflows.DispatcherWorkflowType})
	r.RegisterWorkflowWithOptions(workflows.DeclareTopology, workflow.RegisterOptions{Name: workflows.TopologyWorkflowType})
}

// registerDeploymentWorkflows registers what runs on the shared deployment task queue.
func registerDeploymentWorkflows(r worker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(workflows.Deployment, workflow.RegisterOptions{Name: workflows.DeploymentWorkflowType})
}

// DeclareTopology runs the topology declaration as a workflow on the replica's task
// queue and waits for it: Mandible declares the topology on every start, before it
// serves.
func DeclareTopology(ctx context.Context, c client.Client, replica string) (activityio.DeclareTopologyResult, error) {
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       workflows.TopologyWorkflowID(replica),
		TaskQueue:                workflows.ReplicaTaskQueue(replica),
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_TERMINATE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowExecutionTimeout: 5 * time.Minute,
		TypedSearchAttributes:    temporal.NewSearchAttributes(workflows.ReplicaSearchAttribute.ValueSet(replica)),
		StaticSummary:            "RabbitMQ topology declaration at start-up of replica " + replica,
	}, workflows.TopologyWorkflowType)
	if err != nil {
		return activityio.DeclareTopologyResult{}, fmt.Errorf("starting topology declaration: %w", err)
	}
	var res activityio.DeclareTopologyResult
	if err := run.Get(ctx, &res); err != nil {
		var appErr *temporal.ApplicationError
		if errors.As(err, &appErr) {
			return res, fmt.Errorf("declaring RabbitMQ topology: %s", appErr.Message())
		}
		return res, fmt.Errorf("declaring RabbitMQ topology: %w", err)
	}
	return res, nil
}

// RunDispatch makes sure the replica's dispatcher workflow is running and forwards the
// database's new-request notifications to it as wake-ups, until ctx ends. The
// replica's worker (StartReplicaWorker) runs its activities.
func RunDispatch(ctx context.Context, opts DispatchOptions) error {
	id := workflows.DispatcherWorkflowID(opts.ReplicaID)
	listening := make(chan error, 1)
	go func() { listening <- listenForRequests(ctx, opts) }()

	superviseDispatcher(ctx, opts)

	// Shutting down: stop the loop so no activity is left scheduled on a queue nobody
	// polls; the next start of this replica starts it again (and, should this cancel
	// not be processed, replaces the run that ends cancelled).
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := opts.Client.CancelWorkflow(stopCtx, id, ""); err != nil {
		var notFound *serviceerror.NotFound
		if !errors.As(err, &notFound) {
			opts.Logger.Warn("cancelling dispatcher workflow", "workflow_id", id, "err", err)
		}
	}
	<-listening
	return nil
}

// superviseDispatcher keeps the replica's dispatcher workflow running until ctx ends:
// it starts it (or joins the run already going) and starts it again whenever the run
// ends — cancelled by an earlier shutdown, terminated from the Web UI, or failed — so a
// replica never stays without its dispatch loop.
func superviseDispatcher(ctx context.Context, opts DispatchOptions) {
	queue := workflows.ReplicaTaskQueue(opts.ReplicaID)
	id := workflows.DispatcherWorkflowID(opts.ReplicaID)
	retry := backoff.Backoff{Min: 200 * time.Millisecond, Max: 10 * time.Second}
	for ctx.Err() == nil {
		run, err := opts.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID:                       id,
			TaskQueue:                queue,
			WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
			WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
			TypedSearchAttributes:    temporal.NewSearchAttributes(workflows.ReplicaSearchAttribute.ValueSet(opts.ReplicaID)),
			StaticSummary:            "Dispatch loop of Mandible replica " + opts.ReplicaID,
		}, workflows.DispatcherWorkflowType, opts.Input)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			opts.Logger.WarnContext(ctx, "starting dispatcher workflow failed, retrying", "workflow_id", id, "err", err)
			backoff.Sleep(ctx, retry.Next())
			continue
		}
		opts.Logger.InfoContext(ctx, "dispatcher running", "workflow_id", id, "run_id", run.GetRunID(), "task_queue", queue)
		// Get follows continue-as-new; it returns only when the chain ends.
		err = run.Get(ctx, nil)
		if ctx.Err() != nil {
			return
		}
		opts.Logger.WarnContext(ctx, "dispatcher workflow ended; starting it again", "workflow_id", id, "run_id", run.GetRunID(), "err", err)
		backoff.Sleep(ctx, retry.Next())
	}
}

// listenForRequests LISTENs for new dispatch requests and signals the dispatcher. A
// signal is sent only when none is pending since the latest claim started, so a burst
// of inserts, or a steady stream, costs at most one signal per dispatcher round. It
// reconnects when the connection drops.
func listenForRequests(ctx context.Context, opts DispatchOptions) error {
	id := workflows.DispatcherWorkflowID(opts.ReplicaID)
	for ctx.Err() == nil {
		err := func() error {
			conn, err := opts.DB.Acquire(ctx)
			if err != nil {
				return err
			}
			defer conn.Release()
			if err := schema.Listen(ctx, conn, schema.DispatchRequestsChannel); err != nil {
				return err
			}
			defer func() { _ = schema.UnlistenAll(context.WithoutCancel(ctx), conn) }()
			for {
				if _, err := conn.Conn().WaitForNotification(ctx); err != nil {
					return err
				}
				if !opts.Wakes.WakeOwed() {
					continue
				}
				if err := opts.Client.SignalWorkflow(ctx, id, "", workflows.WakeSignal, nil); err != nil && ctx.Err() == nil {
					opts.Logger.WarnContext(ctx, "waking dispatcher failed; the tick picks the requests up", "err", err)
				}
			}
		}()
		if ctx.Err() != nil {
			return nil
		}
		opts.Logger.WarnContext(ctx, "dispatch LISTEN connection lost, reconnecting", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	return nil
}

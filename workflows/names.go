// Package workflows holds Mantis's Temporal workflows. The code here is deterministic:
// no I/O, no wall clock, no goroutines; everything that touches the world is an activity.
package workflows

import (
	"github.com/mantis-deploy/mantis/internal/contract/activityio"
	"go.temporal.io/sdk/temporal"
)

// Protocol names of Mantis's workflows, as they appear in the Temporal Web UI: the
// workflow types, task queues and signals that workers, clients and tests import from
// here.
const (
	// DispatcherWorkflowType is the registered type of the per-replica dispatch loop.
	DispatcherWorkflowType = "Dispatcher"
	// WakeSignal wakes a dispatcher at once (a new request arrived); wake-ups coalesce.
	WakeSignal = "wake"
	// TaskQueuePrefix prefixes each replica's own task queue.
	TaskQueuePrefix = "mandible-"

	// DeploymentWorkflowType is the registered type of a deployment.
	DeploymentWorkflowType = "Deployment"
	// DefaultDeploymentTaskQueue is the task queue every replica's deployment worker
	// polls unless [temporal] deployment_task_queue says otherwise (config.DefaultMandible
	// carries the same name; a test holds them equal).
	DefaultDeploymentTaskQueue = "mantis-deployments"

	// TopologyWorkflowType declares the RabbitMQ topology when a replica starts.
	TopologyWorkflowType = "DeclareTopology"
)

// DispatcherWorkflowID is the id of replica's dispatcher workflow.
func DispatcherWorkflowID(replica string) string { return "dispatcher:" + replica }

// ReplicaTaskQueue is the task queue only replica's worker polls, so the replica that
// claims a batch is the one that delivers it.
func ReplicaTaskQueue(replica string) string { return TaskQueuePrefix + replica }

// DeploymentWorkflowID is the workflow id of a deployment. StartDeployment reads the
// deployment id back from it (activityio.DeploymentWorkflowIDPrefix).
func DeploymentWorkflowID(id string) string { return activityio.DeploymentWorkflowIDPrefix + id }

// TopologyWorkflowID is the id of replica's topology declaration at start-up.
func TopologyWorkflowID(replica string) string { return "topology:" + replica }

// Search attributes Mantis sets on its workflows. Mandible registers them at start-up.
var (
	// ReplicaSearchAttribute names the Mandible replica a dispatcher belongs to.
	ReplicaSearchAttribute = temporal.NewSearchAttributeKeyKeyword("MantisReplica")
	// DeploymentIDSearchAttribute is a deployment's id.
	DeploymentIDSearchAttribute = temporal.NewSearchAttributeKeyKeyword("MantisDeploymentID")
	// DeploymentNameSearchAttribute is a deployment's name from its spec.
	DeploymentNameSearchAttribute = temporal.NewSearchAttributeKeyKeyword("MantisDeploymentName")
	// DeploymentStatusSearchAttribute is a deployment's state (domain.Deployment*).
	DeploymentStatusSearchAttribute = temporal.NewSearchAttributeKeyKeyword("MantisStatus")
	// DeploymentPrioritySearchAttribute is a deployment's command priority.
	DeploymentPrioritySearchAttribute = temporal.NewSearchAttributeKeyKeyword("MantisPriority")
)

// SearchAttributes lists every search attribute Mantis uses, for registration.
func SearchAttributes() []temporal.SearchAttributeKey {
	return []temporal.SearchAttributeKey{
		ReplicaSearchAttribute,
		DeploymentIDSearchAttribute, DeploymentNameSearchAttribute, DeploymentStatusSearchAttribute, DeploymentPrioritySearchAttribute,
	}
}

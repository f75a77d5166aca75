// Package workflows holds Mantis's Temporal workflows. The code here is deterministic:
// no I/O, no wall clock, no goroutines; everything that touches the world is an activity.
package workflows

import "go.temporal.io/sdk/temporal"

// Dispatcher protocol names, as they appear in the Temporal Web UI.
const (
	// DispatcherWorkflowType is the registered type of the per-replica dispatch loop.
	DispatcherWorkflowType = "Dispatcher"
	// WakeSignal wakes a dispatcher at once (a new request arrived); wake-ups coalesce.
	WakeSignal = "wake"
	// TaskQueuePrefix prefixes each replica's own task queue.
	TaskQueuePrefix = "mandible-"
)

// DispatcherWorkflowID is the id of replica's dispatcher workflow.
func DispatcherWorkflowID(replica string) string { return "dispatcher:" + replica }

// ReplicaTaskQueue is the task queue only replica's worker polls, so the replica that
// claims a batch is the one that delivers it.
func ReplicaTaskQueue(replica string) string { return TaskQueuePrefix + replica }

// Search attributes Mantis sets on its workflows. Mandible registers them at start-up.
var (
	// ReplicaSearchAttribute names the Mandible replica a dispatcher belongs to.
	ReplicaSearchAttribute = temporal.NewSearchAttributeKeyKeyword("MantisReplica")
)

// SearchAttributes lists every search attribute Mantis uses, for registration.
func SearchAttributes() []temporal.SearchAttributeKey {
	return []temporal.SearchAttributeKey{
		ReplicaSearchAttribute,
		DeploymentIDSearchAttribute, DeploymentNameSearchAttribute, DeploymentStatusSearchAttribute, DeploymentPrioritySearchAttribute,
	}
}

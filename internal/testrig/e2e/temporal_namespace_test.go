package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

// createNamespace creates a namespace with the temporal CLI, as an operator would.
func createNamespace(t *testing.T, srv testenv.Temporal, namespace string) {
	t.Helper()
	cmd := exec.Command(devstackTemporal(t), "operator", "namespace", "create", "--namespace", namespace, "--retention", "24h")
	cmd.Env = append(os.Environ(), "TEMPORAL_ADDRESS="+srv.Address)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "creating namespace %s: %s", namespace, out)
}

// listWorkflows returns the workflow ids a visibility query finds in namespace.
func listWorkflows(t *testing.T, c client.Client, namespace, query string) []string {
	t.Helper()
	resp, err := c.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{Namespace: namespace, Query: query})
	if err != nil {
		t.Logf("listing %q: %v", query, err)
		return nil
	}
	var ids []string
	for _, e := range resp.GetExecutions() {
		ids = append(ids, e.GetExecution().GetWorkflowId())
	}
	return ids
}

// Mandible's first start on a namespace just created succeeds in one process, with
// no restart: it registers its search attributes and waits until the namespace maps
// them before it starts a workflow that sets them. A real cluster's namespace cache
// maps a new attribute seconds after it is listed; the dev server at once.
//
//mantis:temporal-server
func TestMandibleFirstStartOnFreshNamespaces(t *testing.T) {
	srv := testenv.TemporalServer(t)
	srv.RequireWantedKind(t)
	t.Logf("Temporal: %s server at %s", srv.Kind, srv.Address)
	c, err := client.Dial(client.Options{HostPort: srv.Address})
	require.NoError(t, err)
	defer c.Close()
	for i := range 3 {
		ns := uniqueName(fmt.Sprintf("fresh%d", i))
		createNamespace(t, srv, ns)
		// With a broker, start-up also starts the topology declaration workflow, which
		// sets MantisReplica: the first use of the attributes in the start path.
		broker := testenv.RabbitMQ(t)
		o := replicaOptions{ID: uniqueName("first"), DatabaseURL: testenv.DatabaseURL(t),
			Temporal: testenv.Temporal{Address: srv.Address, Namespace: ns}, Broker: &broker}
		began := time.Now()
		r := launchReplica(t, o)
		// Its dispatcher workflow carries the MantisReplica search attribute: finding
		// it by that attribute proves the start got past the attributes' first use.
		query := fmt.Sprintf("%s = '%s'", "MantisReplica", o.ID)
		exited := false
		require.Eventually(t, func() bool {
			select {
			case <-r.done:
				exited = true
				return true
			default:
			}
			resp, err := http.Get("http://" + r.HTTPAddr + "/healthz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK && len(listWorkflows(t, c, ns, query)) > 0
		}, 90*time.Second, 200*time.Millisecond, "Mandible on fresh namespace %s", ns)
		require.False(t, exited, "first start of Mandible on fresh namespace %s exited:\n%s", ns, r.log())
		t.Logf("namespace %s: first start ready and its dispatcher found by %q after %s", ns, query, time.Since(began).Round(time.Millisecond))
		r.stop(t)
	}
}

// A deployment over both agent modes is found through the search attributes Mantis
// sets: its id and its final status.
//
//mantis:temporal-server
func TestDeploymentIsFoundBySearchAttributes(t *testing.T) {
	testenv.TemporalServer(t).RequireWantedKind(t)
	s := setupExec(t)
	r := s.mandible.replica
	spec := fmt.Sprintf(`{"name":"findable","targets":[%q,%q],"steps":[{"name":"one","command":"true"}]}`, s.poll.Name, s.listen.Name)
	code, created := api(t, r, http.MethodPost, "/api/v1/deployments", spec)
	require.Equal(t, http.StatusAccepted, code, created)
	id := created["id"].(string)
	waitDeployment(t, r, id, "succeeded")

	srv := testenv.TemporalServer(t)
	c, err := client.Dial(client.Options{HostPort: srv.Address, Namespace: srv.Namespace})
	require.NoError(t, err)
	defer c.Close()
	query := fmt.Sprintf("MantisDeploymentID = '%s' AND MantisStatus = 'succeeded'", id)
	require.Eventually(t, func() bool {
		ids := listWorkflows(t, c, srv.Namespace, query)
		return len(ids) == 1 && ids[0] == "deployment:"+id
	}, 30*time.Second, 200*time.Millisecond, "visibility query %q", query)
}

// postgresStore is what a temporal-server on PostgreSQL (the postgres12 plugin) reports
// as its persistence and visibility store.
const postgresStore = "postgres12"

// The stack's Temporal is the kind it says it is: a production temporal-server keeps
// its history and visibility in PostgreSQL (what `temporal operator cluster describe`
// prints as PersistenceStore and VisibilityStore), the dev server in SQLite. Under
// make test-temporal-server (MANTIS_REQUIRE_TEMPORAL_SERVER=1) it must be the former.
//
//mantis:temporal-server
func TestTemporalServerKindAndPersistence(t *testing.T) {
	srv := testenv.TemporalServer(t)
	srv.RequireWantedKind(t)
	c, err := client.Dial(client.Options{HostPort: srv.Address, Namespace: srv.Namespace})
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info, err := c.WorkflowService().GetClusterInfo(ctx, &workflowservice.GetClusterInfoRequest{})
	require.NoError(t, err)
	t.Logf("Temporal %s at %s: server %s, persistence %s, visibility %s",
		srv.Kind, srv.Address, info.GetServerVersion(), info.GetPersistenceStore(), info.GetVisibilityStore())
	if srv.Kind == testenv.TemporalKindServer {
		require.Equal(t, postgresStore, info.GetPersistenceStore())
		require.Contains(t, info.GetVisibilityStore(), postgresStore)
		return
	}
	require.NotEqual(t, postgresStore, info.GetPersistenceStore(), "the dev server keeps its history in SQLite")
}

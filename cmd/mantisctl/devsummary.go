package main

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/mantis-deploy/mantis/internal/apiclient"
	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/testrig/devstack"
)

// printSummary prints where each part of the local stack is.
func printSummary(stack *devstack.Stack, envPath string, targets []api.Target) {
	e := stack.Env
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "\nMantis local stack is up.")
	fmt.Fprintf(w, "  Mandible API\thttp://%s  (token: %s)\n", devHTTPAddr, "$MANTIS_API_TOKEN")
	fmt.Fprintf(w, "  Console\thttp://%s/ui/  (sign in with $MANTIS_API_TOKEN)\n", devHTTPAddr)
	fmt.Fprintf(w, "  Mandible gRPC\t%s  (mTLS, CA %s)\n", devGRPCAddr, e["MANTIS_CA_CERT"])
	fmt.Fprintf(w, "  Thorax\t%s, agents port %s  (mTLS)\n", devThoraxName, devThoraxAgentsAddr)
	for _, t := range targets {
		where := "polls Thorax"
		if t.Address != nil {
			where = "serves Thorax on " + *t.Address
		}
		fmt.Fprintf(w, "  Target %s\t%s mode, %s, assigned to Thorax instance %s\n", t.Name, t.Mode, where, t.AssignedInstanceID)
	}
	fmt.Fprintf(w, "  Temporal\t%s  namespace %s\n", e["TEMPORAL_ADDRESS"], e["TEMPORAL_NAMESPACE"])
	fmt.Fprintf(w, "  Temporal Web UI\t%s\n", e["TEMPORAL_UI_URL"])
	fmt.Fprintf(w, "  PostgreSQL\t%s  (role mantis, not a superuser; password in $DATABASE_URL)\n", redactURL(e["DATABASE_URL"]))
	fmt.Fprintf(w, "  RabbitMQ\tamqps://127.0.0.1:%s vhost %s users %s and %s (client certificate required)\n",
		e["MANTIS_AMQP_PORT"], e["MANTIS_AMQP_VHOST"], e["MANTIS_AMQP_MANDIBLE_USER"], e["MANTIS_AMQP_THORAX_USER"])
	fmt.Fprintf(w, "  RabbitMQ management\t%s  (user %s, password in $RABBITMQ_PASSWORD)\n", e["RABBITMQ_MANAGEMENT_URL"], e["RABBITMQ_USER"])
	fmt.Fprintf(w, "  Logs\t%s\n", filepath.Join(stack.Dir(), "logs"))
	fmt.Fprintf(w, "\n  Everything above, for scripts:\tsource %s\n", envPath)
	fmt.Fprintln(w, "  Stop:\tCtrl-C (or SIGTERM); data is kept for the next run.")
	w.Flush()
	fmt.Println(b.String())
}

// redactURL drops the password from a URL printed for people.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// sampleDeployment is the three-step deployment make run submits to the two local
// agents, so there is something to watch at once.
const sampleDeployment = `name: sample-release
priority: normal
targets: [` + devPollTarget + `, ` + devListenTarget + `]
steps:
  - name: preflight
    command: uname -a && df -h . | tail -1
    timeout: 30s
  - name: install
    command: echo "installing release on $(hostname)" && sleep 1
    timeout: 1m
  - name: verify
    command: echo "release verified"
    timeout: 30s
`

// submitSample submits the sample deployment and says how to follow it. A failure is
// reported, not fatal: the stack is up either way.
func submitSample(ctx context.Context, client *apiclient.Client, temporalUI string) {
	created, err := client.CreateDeployment(ctx, []byte(sampleDeployment))
	if err != nil {
		fmt.Printf("  Sample deployment could not be submitted: %v\n", err)
		return
	}
	fmt.Printf("Submitted a sample three-step deployment to %s and %s:\n", devPollTarget, devListenTarget)
	fmt.Printf("  watch it:     source .mantis/stack.env && bin/mantisctl watch %s\n", created.ID)
	fmt.Printf("  in Temporal:  %s/namespaces/default/workflows/deployment:%s\n", temporalUI, created.ID)
	fmt.Printf("  all of them:  %s/namespaces/default/workflows?query=WorkflowType%%3D%%22Deployment%%22\n\n", temporalUI)
}

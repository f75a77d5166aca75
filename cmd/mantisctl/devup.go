package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/mantis-deploy/mantis/internal/api"
	"github.com/mantis-deploy/mantis/internal/apiclient"
	"github.com/mantis-deploy/mantis/internal/apitoken"
	"github.com/mantis-deploy/mantis/internal/codec"
	"github.com/mantis-deploy/mantis/internal/devstack"
	"github.com/mantis-deploy/mantis/internal/httpapi"
	"github.com/mantis-deploy/mantis/internal/identity"
	"github.com/mantis-deploy/mantis/schema"
)

// Local stack addresses and names of `make run`.
const (
	devHTTPAddr = "127.0.0.1:8080"
	devGRPCAddr = "127.0.0.1:9090"
	// devCodecKeyFile is the payload codec's keyring in the stack directory (mode 0600).
	devCodecKeyFile = "codec.keys"
	// devThoraxAgentsAddr is where Thorax serves poll-mode agents.
	devThoraxAgentsAddr = "127.0.0.1:9190"
	// devListenAgentAddr is where the listen-mode agent serves Thorax.
	devListenAgentAddr = "127.0.0.1:9191"
	devThoraxName      = "thorax-1"
	devPollTarget      = "agent-poll"
	devListenTarget    = "agent-listen"
	// devTierTimeout bounds each wait for the execution tier: Thorax registering,
	// and each target reaching it. A previous run's instance may hold the listen
	// target until Mandible's heartbeat timeout (15 s) declares it dead.
	devTierTimeout = 60 * time.Second
	// devTokenName names the local stack's admin API token on what it writes.
	devTokenName = "local-admin"
)

func newDevUpCommand() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Set up and run the local stack until Ctrl-C: Temporal, PostgreSQL, RabbitMQ (TLS), Mandible, Thorax and two agents",
		Long: `Install what is missing, then start and supervise the local stack with its data under
--dir (reused on the next run): the Temporal dev server and Web UI, PostgreSQL on 5433,
RabbitMQ with TLS only on 5671 (management over HTTPS on 15671), Mandible (HTTP 8080,
gRPC 9090), Thorax (agents port 9190) and two agents registered as targets: agent-poll
(poll mode) and agent-listen (listen mode on 9191). Every gRPC link uses mutual TLS with
the dev certificates. Writes <dir>/stack.env for scripts; Ctrl-C or SIGTERM stops
everything.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return devUp(cmd.Context(), dir) },
	}
	cmd.Flags().StringVar(&dir, "dir", ".mantis", "directory for the stack's data, logs and certificates")
	return cmd
}

func devUp(ctx context.Context, dir string) error {
	logger := devLogger()
	opts := allServers(dir)
	opts.Ports = devstack.DefaultPorts()
	opts.UICodecEndpoint = "http://" + devHTTPAddr + httpapi.CodecPrefix
	if err := devstack.Install(ctx, logger, opts); err != nil {
		return err
	}
	logger.Info("starting servers", "dir", dir)
	stack, err := devstack.Start(ctx, opts)
	if err != nil {
		return err
	}
	defer func() {
		logger.Info("stopping the stack")
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
		defer cancel()
		if err := stack.Stop(stopCtx); err != nil {
			logger.Warn("stopping the stack", "err", err)
		}
		logger.Info("stopped")
	}()

	token, err := stack.Secret("api-token")
	if err != nil {
		return err
	}
	bin, err := siblingBinary("mandible")
	if err != nil {
		return err
	}
	mandibleConfig, err := writeMandibleConfig(stack, token)
	if err != nil {
		return err
	}
	if err := stack.Spawn("mandible", bin, []string{"--config", mandibleConfig}, nil); err != nil {
		return err
	}
	if err := stack.WaitHTTP(ctx, "mandible", "http://"+devHTTPAddr+"/healthz", 60*time.Second); err != nil {
		return err
	}

	targets, err := startExecutionTier(ctx, stack, apiclient.New("http://"+devHTTPAddr, token))
	if err != nil {
		return err
	}

	envPath := filepath.Join(stack.Dir(), "stack.env")
	if err := stack.WriteEnv(envPath, map[string]string{
		"MANTIS_API_URL":            "http://" + devHTTPAddr,
		"MANTIS_API_TOKEN":          token,
		"MANTIS_GRPC_ADDR":          devGRPCAddr,
		"MANTIS_THORAX_AGENTS_ADDR": devThoraxAgentsAddr,
		"MANTIS_AGENT_LISTEN_ADDR":  devListenAgentAddr,
		"MANTIS_TARGET_POLL":        devPollTarget,
		"MANTIS_TARGET_LISTEN":      devListenTarget,
	}); err != nil {
		return err
	}
	printSummary(stack, envPath, targets)
	submitSample(ctx, apiclient.New("http://"+devHTTPAddr, token), stack.Env["TEMPORAL_UI_URL"])

	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if name := stack.Exited(); name != "" {
				return fmt.Errorf("%s exited; see %s", name, stack.LogPath(name))
			}
		}
	}
}

// siblingBinary finds another Mantis binary next to this one (make build puts them in bin/).
func siblingBinary(name string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	p := filepath.Join(filepath.Dir(self), name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s not found next to mantisctl (%s): run `make build`", name, p)
	}
	return p, nil
}

func writeMandibleConfig(stack *devstack.Stack, token string) (string, error) {
	e := stack.Env
	// Mandible keeps only the token's hash; mantisctl reads the token from stack.env.
	tokenFile, err := writeConfig(stack, "tokens.toml", apitoken.FileLine(devTokenName, apitoken.ScopeAdmin, token))
	if err != nil {
		return "", err
	}
	mandibleCert, mandibleKey := stack.Certs.Pair("mandible")
	// The local stack encrypts Temporal payloads; the key stays across runs so that
	// earlier histories stay readable.
	codecKeys := filepath.Join(stack.Dir(), devCodecKeyFile)
	if _, err := codec.WriteKeyFile(codecKeys, "local-1"); err != nil {
		return "", err
	}
	conf := fmt.Sprintf(`# Written by mantisctl dev up for the local stack.
replica_id = "local-1"

[database]
url = %q

[temporal]
address = %q
namespace = %q
ui_url = %q
codec_key_file = %q

[http]
listen = %q
token_file = %q

[grpc]
listen = %q
ca_cert_path = %q
cert_path = %q
key_path = %q

[queue]
enabled = true
host = %q
port = %s
username = %q
password = %q
vhost = %q
ca_cert_path = %q
client_cert_path = %q
client_key_path = %q
`, e["DATABASE_URL"], e["TEMPORAL_ADDRESS"], e["TEMPORAL_NAMESPACE"], e["TEMPORAL_UI_URL"], codecKeys, devHTTPAddr, tokenFile,
		devGRPCAddr, stack.Certs.CACert(), mandibleCert, mandibleKey,
		e["MANTIS_AMQP_HOST"], e["MANTIS_AMQP_PORT"], e["MANTIS_AMQP_MANDIBLE_USER"], e["MANTIS_AMQP_MANDIBLE_PASSWORD"], e["MANTIS_AMQP_VHOST"],
		stack.Certs.CACert(), e["MANTIS_CLIENT_CERT"], e["MANTIS_CLIENT_KEY"])
	return writeConfig(stack, "mandible.toml", conf)
}

// startExecutionTier starts Thorax and the two agents, waits until Thorax has
// registered with Mandible, registers the listen-mode target through the API so that
// it is pinned to this Thorax, and waits until Thorax's heartbeat has registered the
// poll-mode target. It returns both targets.
func startExecutionTier(ctx context.Context, stack *devstack.Stack, client *apiclient.Client) ([]api.Target, error) {
	logger := stack.Logger()
	db, err := pgx.Connect(ctx, stack.Env["DATABASE_URL"])
	if err != nil {
		return nil, fmt.Errorf("connecting to PostgreSQL: %w", err)
	}
	defer db.Close(context.WithoutCancel(ctx))
	// Instances registered from now on are this run's; the database's clock decides.
	var since time.Time
	if err := db.QueryRow(ctx, `SELECT now()`).Scan(&since); err != nil {
		return nil, fmt.Errorf("reading the database clock: %w", err)
	}

	thoraxBin, err := siblingBinary("thorax")
	if err != nil {
		return nil, err
	}
	agentBin, err := siblingBinary("agent")
	if err != nil {
		return nil, err
	}
	if err := issueDevIdentities(stack); err != nil {
		return nil, err
	}
	for _, p := range []struct{ name, bin, conf string }{
		{"thorax", thoraxBin, thoraxConfig(stack)},
		{devListenTarget, agentBin, listenAgentConfig(stack)},
		{devPollTarget, agentBin, pollAgentConfig(stack)},
	} {
		path, err := writeConfig(stack, p.name+".toml", p.conf)
		if err != nil {
			return nil, err
		}
		if err := stack.Spawn(p.name, p.bin, []string{"--config", path}, nil); err != nil {
			return nil, err
		}
	}

	var instance uuid.UUID
	err = waitTier(ctx, stack, "thorax registering with mandible", func(ctx context.Context) (bool, error) {
		err := db.QueryRow(ctx, `
			SELECT id FROM thorax_instances
			WHERE name = $1 AND status = 'live' AND registered_at >= $2
			ORDER BY registered_at DESC LIMIT 1`, devThoraxName, since).Scan(&instance)
		if errors.Is(err, pgx.ErrNoRows) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return nil, err
	}
	logger.Info("thorax registered", "instance_id", instance)

	var listen, poll api.Target
	err = waitTier(ctx, stack, "the listen-mode target pinned to thorax", func(ctx context.Context) (bool, error) {
		// Registering again is an update: Mandible keeps a live assignment and otherwise
		// pins the target to the live instance with the fewest targets.
		t, err := client.RegisterTarget(ctx, api.NewTarget{
			Name: devListenTarget, Mode: schema.ModeListen, Address: devListenAgentAddr,
			Labels: map[string]string{"stack": "local"},
		})
		if err != nil {
			return false, err
		}
		listen = t
		return t.AssignedInstanceID != nil && *t.AssignedInstanceID == instance, nil
	})
	if err != nil {
		return nil, err
	}
	err = waitTier(ctx, stack, "the poll-mode agent reaching thorax", func(ctx context.Context) (bool, error) {
		targets, err := client.ListTargets(ctx)
		if err != nil {
			return false, err
		}
		for _, t := range targets {
			if t.Name == devPollTarget && t.AssignedInstanceID != nil && *t.AssignedInstanceID == instance {
				poll = t
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return nil, err
	}
	return []api.Target{poll, listen}, nil
}

// waitTier polls check until it holds, a process of the stack exits, or devTierTimeout
// passes. Errors of check are retried; the last one is reported on timeout.
func waitTier(parent context.Context, stack *devstack.Stack, what string, check func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(parent, devTierTimeout)
	defer cancel()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if name := stack.Exited(); name != "" {
			return fmt.Errorf("waiting for %s: %s exited; see %s", what, name, stack.LogPath(name))
		}
		ok, err := check(ctx)
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if parent.Err() != nil {
				return parent.Err() // stopped (Ctrl-C) while starting
			}
			if last != nil {
				return fmt.Errorf("waiting for %s: not done after %s: %w", what, devTierTimeout, last)
			}
			return fmt.Errorf("waiting for %s: not done after %s; see the logs in %s", what, devTierTimeout, filepath.Join(stack.Dir(), "logs"))
		case <-tick.C:
		}
	}
}

// thoraxConfig is thorax.toml for the local stack: Mandible over mTLS, the broker of
// the stack, a short polling tick, and the agents port with the same dev CA.
func thoraxConfig(stack *devstack.Stack) string {
	e := stack.Env
	ca := stack.Certs.CACert()
	cert, key := stack.Certs.Issued(identity.RoleThorax, devThoraxName)
	return fmt.Sprintf(`# Written by mantisctl dev up for the local stack.
name = %q

[mandible]
address = %q
ca_cert_path = %q
cert_path = %q
key_path = %q

[queue]
enabled = true
host = %q
port = %s
username = %q
password = %q
vhost = %q
ca_cert_path = %q
client_cert_path = %q
client_key_path = %q
prefetch_count = 10

[polling]
interval = "2s"

[agents]
listen = %q
ca_cert_path = %q
cert_path = %q
key_path = %q

[drain]
timeout = "10s"
`, devThoraxName, devGRPCAddr, ca, cert, key,
		e["MANTIS_AMQP_HOST"], e["MANTIS_AMQP_PORT"], e["MANTIS_AMQP_THORAX_USER"], e["MANTIS_AMQP_THORAX_PASSWORD"], e["MANTIS_AMQP_VHOST"],
		ca, e["MANTIS_CLIENT_CERT"], e["MANTIS_CLIENT_KEY"],
		devThoraxAgentsAddr, ca, cert, key)
}

// pollAgentConfig is the configuration of agent-poll, which calls Thorax's agents port.
func pollAgentConfig(stack *devstack.Stack) string {
	cert, key := stack.Certs.Issued(identity.RoleAgent, devPollTarget)
	return fmt.Sprintf(`# Written by mantisctl dev up for the local stack.
name = %q
mode = "poll"

[thorax]
address = %q
ca_cert_path = %q
cert_path = %q
key_path = %q

[journal]
dir = %q
`, devPollTarget, devThoraxAgentsAddr, stack.Certs.CACert(), cert, key, agentJournalDir(stack, devPollTarget))
}

// agentJournalDir keeps a local agent's run journal with the rest of the stack's data.
func agentJournalDir(stack *devstack.Stack, name string) string {
	dir, err := filepath.Abs(filepath.Join(stack.Dir(), "agents", name, "journal"))
	if err != nil {
		return filepath.Join(stack.Dir(), "agents", name, "journal")
	}
	return dir
}

// listenAgentConfig is the configuration of agent-listen, which serves Thorax alone.
func listenAgentConfig(stack *devstack.Stack) string {
	cert, key := stack.Certs.Issued(identity.RoleAgent, devListenTarget)
	return fmt.Sprintf(`# Written by mantisctl dev up for the local stack.
name = %q
mode = "listen"

[listen]
address = %q
ca_cert_path = %q
cert_path = %q
key_path = %q

[journal]
dir = %q
`, devListenTarget, devListenAgentAddr, stack.Certs.CACert(), cert, key, agentJournalDir(stack, devListenTarget))
}

// writeConfig writes a process's configuration under <dir>/config; it holds secrets.
func writeConfig(stack *devstack.Stack, name, content string) (string, error) {
	dir := filepath.Join(stack.Dir(), "config")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	path := filepath.Join(dir, name)
	return path, os.WriteFile(path, []byte(content), 0o600)
}

func printSummary(stack *devstack.Stack, envPath string, targets []api.Target) {
	e := stack.Env
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "\nMantis local stack is up.")
	fmt.Fprintf(w, "  Mandible API\thttp://%s  (token: %s)\n", devHTTPAddr, "$MANTIS_API_TOKEN")
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

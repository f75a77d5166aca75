package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/mantis-deploy/mantis/internal/apiclient"
	"github.com/mantis-deploy/mantis/internal/codec"
	"github.com/mantis-deploy/mantis/internal/mandible/apitoken"
	"github.com/mantis-deploy/mantis/internal/mandible/httpapi"
	"github.com/mantis-deploy/mantis/internal/testrig/devstack"
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
	var (
		dir            string
		temporalServer bool
	)
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
		RunE: func(cmd *cobra.Command, _ []string) error { return devUp(cmd.Context(), dir, temporalServer) },
	}
	cmd.Flags().StringVar(&dir, "dir", ".mantis", "directory for the stack's data, logs and certificates")
	cmd.Flags().BoolVar(&temporalServer, temporalServerFlag, false, temporalServerUsage)
	return cmd
}

func devUp(ctx context.Context, dir string, temporalServer bool) error {
	logger := devLogger()
	opts := allServers(dir, temporalServer)
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

// writeMandibleConfig writes mandible.toml and the token file it names.
func writeMandibleConfig(stack *devstack.Stack, token string) (string, error) {
	// Mandible keeps only the token's hash; mantisctl reads the token from stack.env.
	tokenFile, err := writeConfig(stack.Dir(), "tokens.toml", []byte(apitoken.FileLine(devTokenName, apitoken.ScopeAdmin, token)))
	if err != nil {
		return "", err
	}
	// The local stack encrypts Temporal payloads; the key stays across runs so that
	// earlier histories stay readable.
	codecKeys := filepath.Join(stack.Dir(), devCodecKeyFile)
	if _, err := codec.WriteKeyFile(codecKeys, devReplicaID); err != nil {
		return "", err
	}
	c, err := mandibleDevConfig(stack.Env, devFiles{dir: stack.Dir(), certs: stack.Certs, codecKeys: codecKeys, tokenFile: tokenFile})
	if err != nil {
		return "", err
	}
	return writeTOML(stack.Dir(), "mandible.toml", c)
}

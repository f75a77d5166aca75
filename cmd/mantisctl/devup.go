package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/mantis-deploy/mantis/internal/devstack"
)

// Local stack addresses of `make run`.
const (
	devHTTPAddr = "127.0.0.1:8080"
	devGRPCAddr = "127.0.0.1:9090"
)

func newDevUpCommand() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Set up and run the local stack until Ctrl-C: Temporal, PostgreSQL, RabbitMQ (TLS) and Mandible",
		Long: `Install what is missing, then start and supervise the local stack with its data under
--dir (reused on the next run): the Temporal dev server and Web UI, PostgreSQL on 5433,
RabbitMQ with TLS only on 5671 (management over HTTPS on 15671), and Mandible (HTTP 8080,
gRPC 9090). Writes <dir>/stack.env for scripts; Ctrl-C or SIGTERM stops everything.`,
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

	envPath := filepath.Join(stack.Dir(), "stack.env")
	if err := stack.WriteEnv(envPath, map[string]string{
		"MANTIS_API_URL":   "http://" + devHTTPAddr,
		"MANTIS_API_TOKEN": token,
		"MANTIS_GRPC_ADDR": devGRPCAddr,
	}); err != nil {
		return err
	}
	printSummary(stack, envPath)

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
	mandibleCert, mandibleKey := stack.Certs.Pair("mandible")
	conf := fmt.Sprintf(`# Written by mantisctl dev up for the local stack.
replica_id = "local-1"

[database]
url = %q

[temporal]
address = %q
namespace = %q

[http]
listen = %q
tokens = [%q]

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
`, e["DATABASE_URL"], e["TEMPORAL_ADDRESS"], e["TEMPORAL_NAMESPACE"], devHTTPAddr, token,
		devGRPCAddr, stack.Certs.CACert(), mandibleCert, mandibleKey,
		e["MANTIS_AMQP_HOST"], e["MANTIS_AMQP_PORT"], e["RABBITMQ_USER"], e["RABBITMQ_PASSWORD"], e["MANTIS_AMQP_VHOST"],
		stack.Certs.CACert(), e["MANTIS_CLIENT_CERT"], e["MANTIS_CLIENT_KEY"])
	dir := filepath.Join(stack.Dir(), "config")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "mandible.toml")
	return path, os.WriteFile(path, []byte(conf), 0o600)
}

func printSummary(stack *devstack.Stack, envPath string) {
	e := stack.Env
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "\nMantis local stack is up.")
	fmt.Fprintf(w, "  Mandible API\thttp://%s  (token: %s)\n", devHTTPAddr, "$MANTIS_API_TOKEN")
	fmt.Fprintf(w, "  Mandible gRPC\t%s  (mTLS, CA %s)\n", devGRPCAddr, e["MANTIS_CA_CERT"])
	fmt.Fprintf(w, "  Temporal\t%s  namespace %s\n", e["TEMPORAL_ADDRESS"], e["TEMPORAL_NAMESPACE"])
	fmt.Fprintf(w, "  Temporal Web UI\t%s\n", e["TEMPORAL_UI_URL"])
	fmt.Fprintf(w, "  PostgreSQL\t%s\n", e["DATABASE_URL"])
	fmt.Fprintf(w, "  RabbitMQ\tamqps://127.0.0.1:%s vhost %s user %s (client certificate required)\n", e["MANTIS_AMQP_PORT"], e["MANTIS_AMQP_VHOST"], e["RABBITMQ_USER"])
	fmt.Fprintf(w, "  RabbitMQ management\t%s  (user %s, password in $RABBITMQ_PASSWORD)\n", e["RABBITMQ_MANAGEMENT_URL"], e["RABBITMQ_USER"])
	fmt.Fprintf(w, "  Logs\t%s\n", filepath.Join(stack.Dir(), "logs"))
	fmt.Fprintf(w, "\n  Everything above, for scripts:\tsource %s\n", envPath)
	fmt.Fprintln(w, "  Stop:\tCtrl-C (or SIGTERM); data is kept for the next run.")
	w.Flush()
	fmt.Println(b.String())
}

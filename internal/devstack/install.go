package devstack

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
)

// Install puts in place what the selected servers need and the machine lacks: the
// temporal CLI (go install) and RabbitMQ (apt, when running as root). PostgreSQL is
// expected from the OS. It does nothing when everything is there.
func Install(ctx context.Context, logger *slog.Logger, opts Options) error {
	if opts.Temporal {
		if _, err := findTemporal(); err != nil {
			logger.Info("installing the temporal CLI (first time only, takes several minutes)", "version", temporalCLIVersion)
			cmd := exec.CommandContext(ctx, "go", "install", "github.com/temporalio/cli/cmd/temporal@"+temporalCLIVersion)
			cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("installing temporal CLI %s: %w", temporalCLIVersion, err)
			}
		}
	}
	if opts.Temporal && opts.TemporalServer {
		if err := TemporalServerTools(ctx, logger); err != nil {
			return err
		}
	}
	var pkgs []string
	if opts.RabbitMQ {
		if _, err := os.Stat("/usr/lib/rabbitmq/bin/rabbitmq-server"); err != nil {
			pkgs = append(pkgs, "rabbitmq-server")
		}
	}
	if opts.Postgres {
		if _, err := postgresBinDir(); err != nil {
			pkgs = append(pkgs, "postgresql")
		}
	}
	if len(pkgs) == 0 {
		return nil
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("missing packages %s: install them (apt-get install -y %s) or run as root", strings.Join(pkgs, ", "), strings.Join(pkgs, " "))
	}
	logger.Info("installing packages", "packages", pkgs)
	for _, args := range [][]string{{"update", "-q"}, append([]string{"install", "-y", "-q", "--no-install-recommends"}, pkgs...)} {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("apt-get %s: %w", args[0], err)
		}
	}
	// The Debian package may start a broker service of its own on the default ports;
	// the stack runs its own node.
	_ = exec.CommandContext(ctx, "service", "rabbitmq-server", "stop").Run()
	return nil
}

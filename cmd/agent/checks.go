package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/mantis-deploy/mantis/internal/agent"
	"github.com/mantis-deploy/mantis/internal/cli"
	"github.com/mantis-deploy/mantis/internal/config"
)

// Names of the checks of agent check-config --connect.
const (
	checkThorax     = "thorax grpc"
	checkListenCert = "listen TLS"
)

// dependencyChecks are what agent check-config --connect reaches: in poll mode its
// Thorax (with the agent's pair, checking that the server is a Thorax); a listen-mode
// agent calls nobody, so its check is that its server credentials load and name
// its own target.
func dependencyChecks(cfg config.Agent, _ *slog.Logger) []cli.Check {
	if cfg.Mode == config.ModeListen {
		return []cli.Check{{Name: checkListenCert, Run: func(context.Context) (string, error) {
			if _, err := agent.ListenCredentials(cfg.Listen); err != nil {
				return "", fmt.Errorf("listen TLS: %w", err)
			}
			if err := agent.CheckListenIdentity(cfg); err != nil {
				return "", fmt.Errorf("listen TLS: %w", err)
			}
			return "", nil
		}}}
	}
	creds, err := agent.ThoraxCredentials(cfg.Thorax)
	if err != nil {
		return []cli.Check{{Name: checkThorax, Run: func(context.Context) (string, error) {
			return "", fmt.Errorf("thorax TLS: %w", err)
		}}}
	}
	return []cli.Check{cli.GRPCCheck(checkThorax, cfg.Thorax.Address, creds)}
}

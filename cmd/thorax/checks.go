package main

import (
	"context"
	"fmt"
	"log/slog"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/mantis-deploy/mantis/internal/broker"
	"github.com/mantis-deploy/mantis/internal/cli"
	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/identity"
	"github.com/mantis-deploy/mantis/internal/tlsconf"
)

// checkMandible names the check of Mandible's gRPC service.
const checkMandible = "mandible grpc"

// dependencyChecks are what thorax check-config --connect reaches: Mandible's gRPC
// service (with Thorax's pair, checking that the server is a Mandible) and the broker
// when enabled.
func dependencyChecks(cfg config.Thorax, _ *slog.Logger) []cli.Check {
	checks := []cli.Check{mandibleCheck(cfg.Mandible)}
	if cfg.Queue.Enabled {
		checks = append(checks, cli.Check{Name: broker.CheckName, Run: func(ctx context.Context) (string, error) {
			return broker.CheckConnection(ctx, cfg.Queue.Queue, "thorax "+cfg.Name+" check-config")
		}})
	}
	return checks
}

func mandibleCheck(cfg config.Endpoint) cli.Check {
	creds := insecure.NewCredentials()
	if !cfg.Insecure {
		tc, err := tlsconf.Client(tlsconf.Files{CA: cfg.CACertPath, Cert: cfg.CertPath, Key: cfg.KeyPath}, "")
		if err != nil {
			return cli.Check{Name: checkMandible, Run: func(context.Context) (string, error) {
				return "", fmt.Errorf("mandible TLS: %w", err)
			}}
		}
		tlsconf.RequirePeerRole(tc, identity.RoleMandible)
		creds = credentials.NewTLS(tc)
	}
	return cli.GRPCCheck(checkMandible, cfg.Address, creds)
}

package grpcapi

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/mantis-deploy/mantis/internal/secretenv"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
	"github.com/mantis-deploy/mantis/schema"
)

// openSecrets opens and resolves the sealed env values of the commands an instance
// just claimed, and returns the Commands Thorax receives, each naming its secret env
// so that the agent masks those values in the command's output: this is the only
// place a secret is in clear on Mandible, and only in memory, on its way into the
// Command. A command whose secret cannot be opened or resolved (a lost key, a missing
// file) is failed at once with the reason, and left out of the answer, so that it ends
// rather than runs without its secret.
func (s *MandibleService) openSecrets(ctx context.Context, instance uuid.UUID, cmds []schema.Command) []*mantisv1.Command {
	out := make([]*mantisv1.Command, 0, len(cmds))
	for _, c := range cmds {
		deployment := ""
		if c.DeploymentID != nil {
			deployment = c.DeploymentID.String()
		}
		secret := secretenv.SealedNames(c.Env)
		env, err := secretenv.OpenEnv(s.Secrets, s.SecretResolver, deployment, c.Env)
		if err == nil {
			c.Env = env
			pc := commandToProto(c)
			pc.SecretEnv = secret
			out = append(out, pc)
			continue
		}
		s.Logger.WarnContext(ctx, "failing command: its secret env could not be resolved",
			"command_id", c.ID, "deployment_id", deployment, "target", c.Target, "err", err)
		now := time.Now()
		if _, ferr := schema.StoreCommandResult(ctx, s.DB, schema.ResultToStore{Instance: instance, Command: c.ID, Epoch: c.LeaseEpoch, Result: schema.CommandResult{
			ExitCode: -1, Error: err.Error(), StartedAt: now, FinishedAt: now,
		}}); ferr != nil {
			// The command stays running under this instance's lease: the result grace
			// of the settle loop ends it.
			s.Logger.ErrorContext(ctx, "failing command with unresolvable secret env", "command_id", c.ID, "err", ferr)
		}
	}
	return out
}

package httpapi

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"

	"github.com/google/uuid"

	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/contract/spec"
	"github.com/mantis-deploy/mantis/internal/secretenv"
)

// secretProblems refuses the env_secret of a spec Mandible cannot seal: without the
// codec keyring, or given already sealed (a sealed value is Mandible's to make, bound
// to its deployment; one copied from elsewhere is refused rather than trusted).
func (s *server) secretProblems(d spec.Deployment) []api.FieldProblem {
	var problems []api.FieldProblem
	for i, st := range d.Steps {
		at := fmt.Sprintf("steps[%d].env_secret", i)
		if len(st.EnvSecret) > 0 && s.secrets == nil {
			problems = append(problems, api.FieldProblem{Field: at,
				Problem: "secret env values need the codec keyring on Mandible: set temporal.codec_key_file or temporal.codec_keys_dir"})
			continue
		}
		for name, v := range st.EnvSecret {
			if secretenv.IsSealed(v) {
				problems = append(problems, api.FieldProblem{Field: at + "." + name,
					Problem: "give the value or a file:/env: reference, not a sealed value"})
			}
		}
	}
	return problems
}

// secretWarnings names the literal env_secret values of d too short for the agent to
// mask in output (a reference is resolved only when a command needs it: the agent
// logs a short one then).
func secretWarnings(d spec.Deployment) []api.FieldWarning {
	var warnings []api.FieldWarning
	for i, st := range d.Steps {
		for _, name := range slices.Sorted(maps.Keys(st.EnvSecret)) {
			v, literal := secretenv.Literal(st.EnvSecret[name])
			if literal && v != "" && len(v) < secretenv.MinMaskBytes {
				warnings = append(warnings, api.FieldWarning{Field: fmt.Sprintf("steps[%d].env_secret.%s", i, name),
					Warning: fmt.Sprintf("shorter than %d bytes: not masked in output", secretenv.MinMaskBytes)})
			}
		}
	}
	return warnings
}

// sealSpec seals d's secrets for deployment id, answering 500 itself on failure.
func (s *server) sealSpec(w http.ResponseWriter, r *http.Request, d spec.Deployment, id uuid.UUID) (spec.Deployment, bool) {
	sealed, err := d.SealSecrets(secretenv.Sealer(s.secrets, id.String()))
	if err != nil {
		writeServerError(w, r, s.logger, fmt.Errorf("sealing secret env: %w", err))
		return d, false
	}
	return sealed, true
}

// redactSpec returns a stored spec with every env_secret value shown as
// secretenv.Redacted; a spec that does not parse is left out.
func redactSpec(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return raw
	}
	var d spec.Deployment
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil
	}
	if !d.HasSecrets() {
		return raw
	}
	out, err := json.Marshal(d.RedactSecrets())
	if err != nil {
		return nil
	}
	return out
}

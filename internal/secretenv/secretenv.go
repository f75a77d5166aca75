// Package secretenv seals the secret env values of a deployment's steps (a step's
// env_secret) with the payload codec's keyring, and opens and resolves them when a
// Thorax fetches the command that needs them.
//
// A sealed value is a string, "mantis-secret:v1:<key id>:<base64>", so it travels in
// the same places as a plain env value (the spec in deployments.spec, the env jsonb of
// pending_dispatch_requests and command_queue, the Deployment workflow's input) and is
// told apart by its prefix. What is sealed binds the value to its deployment and its
// variable name: a sealed value copied into another deployment, or under another name,
// does not open. The key id lets the keyring rotate, as the codec does. The keyring
// seals them with a key of their own (KeyPurpose), not the payloads' key; a value
// sealed before keys were derived still opens.
//
// A secret is a literal value or a reference resolved on Mandible at fetch time:
// "file:/path" (the file's content, one trailing newline dropped; the file must lie
// under secrets.files_dir) or "env:MANTIS_SECRET_<NAME>" (that variable of Mandible's
// environment). "value:<text>" is the literal text, for one that starts like a
// reference. References are resolved at fetch, not at creation, so the secret itself
// is stored nowhere and a rotated file or variable reaches the next command.
package secretenv

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

const (
	// Prefix starts every sealed value.
	Prefix = "mantis-secret:v1:"
	// Redacted is what views, logs and mantisctl show in place of a secret value.
	Redacted = "<secret>"
	// Mask is what stands in a command's output for a secret value: the agent
	// replaces each value, and its base64 and URL-encoded forms, before the output
	// leaves the host.
	Mask = "***"
	// MinMaskBytes is the length of the shortest value the agent masks: masking a
	// shorter one would garble ordinary output and hide little. Creating a
	// deployment with a shorter literal secret answers with a warning naming it.
	MinMaskBytes = 4
)

// ErrNoKeyring is the refusal of a secret when Mandible has no codec keyring.
var ErrNoKeyring = errors.New("secret env values need the codec keyring: set temporal.codec_key_file or temporal.codec_keys_dir")

// KeyPurpose is the purpose secret env values are sealed for: the keyring derives a
// key for it that seals nothing else, so a Temporal payload never opens as a secret
// nor a secret as a payload.
const KeyPurpose = "secret-env"

// Keyring seals and opens for a purpose under a current key id; *codec.Codec is one.
type Keyring interface {
	CurrentKeyID() string
	SealFor(purpose string, plain []byte) ([]byte, error)
	OpenFor(purpose, keyID string, sealed []byte) ([]byte, error)
}

// sealedBody is what is encrypted: the value bound to where it may be used.
type sealedBody struct {
	Deployment string `json:"deployment"`
	Name       string `json:"name"`
	Value      string `json:"value"`
}

// IsSealed reports whether v is a sealed value.
func IsSealed(v string) bool { return strings.HasPrefix(v, Prefix) }

// Seal seals value, the secret of variable name in deployment deploymentID.
func Seal(k Keyring, deploymentID, name, value string) (string, error) {
	if k == nil {
		return "", ErrNoKeyring
	}
	plain, err := json.Marshal(sealedBody{Deployment: deploymentID, Name: name, Value: value})
	if err != nil {
		return "", fmt.Errorf("sealing secret env %s: %w", name, err)
	}
	sealed, err := k.SealFor(KeyPurpose, plain)
	if err != nil {
		return "", fmt.Errorf("sealing secret env %s: %w", name, err)
	}
	return Prefix + k.CurrentKeyID() + ":" + base64.RawStdEncoding.EncodeToString(sealed), nil
}

// Sealer returns a function sealing the secrets of deployment deploymentID, as
// spec.Deployment.SealSecrets takes it.
func Sealer(k Keyring, deploymentID string) func(name, value string) (string, error) {
	return func(name, value string) (string, error) { return Seal(k, deploymentID, name, value) }
}

// Open returns what v sealed (a literal or a reference), refusing a value sealed for
// another deployment or another variable name.
func Open(k Keyring, deploymentID, name, v string) (string, error) {
	if k == nil {
		return "", ErrNoKeyring
	}
	rest, ok := strings.CutPrefix(v, Prefix)
	if !ok {
		return "", fmt.Errorf("secret env %s is not sealed", name)
	}
	keyID, encoded, ok := strings.Cut(rest, ":")
	if !ok {
		return "", fmt.Errorf("secret env %s: sealed value names no key", name)
	}
	sealed, err := base64.RawStdEncoding.DecodeString(encoded)
	if err != nil {
		return "", fmt.Errorf("secret env %s: sealed value is not base64", name)
	}
	plain, err := k.OpenFor(KeyPurpose, keyID, sealed)
	if err != nil {
		return "", fmt.Errorf("opening secret env %s: %w", name, err)
	}
	var body sealedBody
	if err := json.Unmarshal(plain, &body); err != nil {
		return "", fmt.Errorf("opening secret env %s: %w", name, err)
	}
	if body.Deployment != deploymentID || body.Name != name {
		return "", fmt.Errorf("secret env %s was sealed for another deployment or variable", name)
	}
	return body.Value, nil
}

// SealedNames returns the names of env's sealed values, sorted; nil when none is.
func SealedNames(env map[string]string) []string {
	var names []string
	for k, v := range env {
		if IsSealed(v) {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	return names
}

// Redact returns env with every sealed value replaced by Redacted; env itself is left
// alone. It returns env when nothing is sealed.
func Redact(env map[string]string) map[string]string {
	var out map[string]string
	for k, v := range env {
		if !IsSealed(v) {
			continue
		}
		if out == nil {
			out = make(map[string]string, len(env))
			for k2, v2 := range env {
				out[k2] = v2
			}
		}
		out[k] = Redacted
	}
	if out == nil {
		return env
	}
	return out
}

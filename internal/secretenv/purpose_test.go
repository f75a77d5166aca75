package secretenv_test

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/mantis-deploy/mantis/internal/codec"
	"github.com/mantis-deploy/mantis/internal/secretenv"
)

// authFailed is how AES-GCM refuses data sealed under another key.
const authFailed = "message authentication failed"

// Temporal payloads and secret env values are sealed with different keys derived from
// the one keyring: the ciphertext of a payload does not open as a secret, nor the
// ciphertext of a secret as a payload, though the key id and the additional data match.
func TestPayloadAndSecretCiphertextsDoNotOpenAsEachOther(t *testing.T) {
	t.Parallel()
	k, err := codec.New("k1", map[string][]byte{"k1": newKey(t)})
	require.NoError(t, err)

	p, err := converter.GetDefaultDataConverter().ToPayload("a workflow input")
	require.NoError(t, err)
	encoded, err := k.Encode([]*commonpb.Payload{p})
	require.NoError(t, err)
	asSecret := secretenv.Prefix + "k1:" + base64.RawStdEncoding.EncodeToString(encoded[0].GetData())
	_, err = secretenv.Open(k, "dep-1", "TOKEN", asSecret)
	require.ErrorContains(t, err, authFailed, "a payload's ciphertext opens as a secret")

	sealed, err := secretenv.Seal(k, "dep-1", "TOKEN", "s3cret-value")
	require.NoError(t, err)
	raw, err := base64.RawStdEncoding.DecodeString(sealed[len(secretenv.Prefix+"k1:"):])
	require.NoError(t, err)
	asPayload := &commonpb.Payload{Metadata: map[string][]byte{
		converter.MetadataEncoding: []byte(codec.Encoding), codec.MetadataKeyID: []byte("k1"),
	}, Data: raw}
	_, err = k.Decode([]*commonpb.Payload{asPayload})
	require.ErrorContains(t, err, authFailed, "a secret's ciphertext opens as a payload")

	got, err := secretenv.Open(k, "dep-1", "TOKEN", sealed)
	require.NoError(t, err)
	require.Equal(t, "s3cret-value", got)
}

// legacySealed is what the codec sealed before keys were derived per purpose.
type legacySealed struct {
	KeyID            string          `json:"key_id"`
	Key              []byte          `json:"key"`
	Payload          json.RawMessage `json:"payload"`
	PayloadValue     string          `json:"payload_value"`
	Secret           string          `json:"secret"`
	SecretDeployment string          `json:"secret_deployment"`
	SecretName       string          `json:"secret_name"`
	SecretValue      string          `json:"secret_value"`
}

// A payload and a secret sealed with the keyring key itself, before keys were derived,
// still open: workflows under way and deployments stored before the upgrade go on.
func TestValuesSealedBeforeKeysWereDerivedStillOpen(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("testdata", "legacy.json"))
	require.NoError(t, err)
	var old legacySealed
	require.NoError(t, json.Unmarshal(b, &old))
	k, err := codec.New(old.KeyID, map[string][]byte{old.KeyID: old.Key})
	require.NoError(t, err)

	var p commonpb.Payload
	require.NoError(t, protojson.Unmarshal(old.Payload, &p))
	decoded, err := k.Decode([]*commonpb.Payload{&p})
	require.NoError(t, err)
	var value string
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(decoded[0], &value))
	require.Equal(t, old.PayloadValue, value)

	got, err := secretenv.Open(k, old.SecretDeployment, old.SecretName, old.Secret)
	require.NoError(t, err)
	require.Equal(t, old.SecretValue, got)
}

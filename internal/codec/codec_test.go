package codec_test

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"

	"github.com/mantis-deploy/mantis/internal/codec"
)

func key(t *testing.T) []byte {
	t.Helper()
	k := make([]byte, codec.KeySize)
	_, err := rand.Read(k)
	require.NoError(t, err)
	return k
}

func TestEncodeSealsAndDecodeOpens(t *testing.T) {
	t.Parallel()
	c, err := codec.New("k1", map[string][]byte{"k1": key(t)})
	require.NoError(t, err)
	plain, err := converter.GetDefaultDataConverter().ToPayload(map[string]string{"env": "hunter2-secret"})
	require.NoError(t, err)

	enc, err := c.Encode([]*commonpb.Payload{plain})
	require.NoError(t, err)
	require.Equal(t, codec.Encoding, string(enc[0].Metadata[converter.MetadataEncoding]))
	require.Equal(t, "k1", string(enc[0].Metadata[codec.MetadataKeyID]))
	require.False(t, bytes.Contains(enc[0].Data, []byte("hunter2-secret")), "the value is sealed")

	dec, err := c.Decode(enc)
	require.NoError(t, err)
	var got map[string]string
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(dec[0], &got))
	require.Equal(t, "hunter2-secret", got["env"])
}

func TestDecodePassesPlainPayloadsThrough(t *testing.T) {
	t.Parallel()
	c, err := codec.New("k1", map[string][]byte{"k1": key(t)})
	require.NoError(t, err)
	plain, err := converter.GetDefaultDataConverter().ToPayload(map[string]int{"a": 1})
	require.NoError(t, err)
	dec, err := c.Decode([]*commonpb.Payload{plain})
	require.NoError(t, err)
	require.Same(t, plain, dec[0])
}

func TestRotationDecryptsWithAnyKnownKey(t *testing.T) {
	t.Parallel()
	oldKey, newKey := key(t), key(t)
	old, err := codec.New("2024", map[string][]byte{"2024": oldKey})
	require.NoError(t, err)
	rotated, err := codec.New("2025", map[string][]byte{"2024": oldKey, "2025": newKey})
	require.NoError(t, err)
	p := &commonpb.Payload{Data: []byte("sealed by the old key")}

	sealedOld, err := old.Encode([]*commonpb.Payload{p})
	require.NoError(t, err)
	opened, err := rotated.Decode(sealedOld)
	require.NoError(t, err)
	require.Equal(t, p.Data, opened[0].Data)

	sealedNew, err := rotated.Encode([]*commonpb.Payload{p})
	require.NoError(t, err)
	require.Equal(t, "2025", string(sealedNew[0].Metadata[codec.MetadataKeyID]))
	_, err = old.Decode(sealedNew)
	require.ErrorIs(t, err, codec.ErrUnknownKey, "a lost key means its payloads cannot be read")
}

func TestTamperedPayloadIsRefused(t *testing.T) {
	t.Parallel()
	c, err := codec.New("k1", map[string][]byte{"k1": key(t)})
	require.NoError(t, err)
	enc, err := c.Encode([]*commonpb.Payload{{Data: []byte("x")}})
	require.NoError(t, err)
	enc[0].Data[len(enc[0].Data)-1] ^= 1
	_, err = c.Decode(enc)
	require.Error(t, err)

	// A payload relabelled with another key id does not open either: the id is bound in.
	other, err := codec.New("k1", map[string][]byte{"k1": key(t), "k2": key(t)})
	require.NoError(t, err)
	enc, err = other.Encode([]*commonpb.Payload{{Data: []byte("x")}})
	require.NoError(t, err)
	enc[0].Metadata[codec.MetadataKeyID] = []byte("k2")
	_, err = other.Decode(enc)
	require.Error(t, err)
}

func TestLoadFileAndDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "codec.keys")
	wrote, err := codec.WriteKeyFile(file, "dev1")
	require.NoError(t, err)
	require.True(t, wrote)
	st, err := os.Stat(file)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	wrote, err = codec.WriteKeyFile(file, "dev2")
	require.NoError(t, err)
	require.False(t, wrote, "an existing keyring is kept")

	c, err := codec.LoadFile(file)
	require.NoError(t, err)
	require.Equal(t, "dev1", c.CurrentKeyID())

	require.NoError(t, os.Chmod(file, 0o644))
	_, err = codec.LoadFile(file)
	require.ErrorContains(t, err, "chmod 600")

	keys := filepath.Join(dir, "keys")
	require.NoError(t, os.Mkdir(keys, 0o700))
	for _, id := range []string{"a", "b"} {
		require.NoError(t, os.WriteFile(filepath.Join(keys, id+codec.KeyFileExt),
			[]byte(base64.StdEncoding.EncodeToString(key(t))+"\n"), 0o600))
	}
	_, err = codec.LoadDir(keys, "")
	require.ErrorContains(t, err, "name the current one")
	c, err = codec.LoadDir(keys, "b")
	require.NoError(t, err)
	require.Equal(t, "b", c.CurrentKeyID())
	_, err = codec.LoadDir(keys, "c")
	require.ErrorContains(t, err, `"c"`)
}

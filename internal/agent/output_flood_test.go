package agent_test

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/safetext"
)

// floodBytes is the output of the flood test: 100 MiB.
const floodBytes = 100 << 20

// A command that prints 100 MiB finishes with its output cut to the limit, the tail
// kept and the cut reported, and the agent allocates a small fraction of the flood
// while reading it. Not parallel, so that the allocation count is this run's alone.
func TestOutputFloodIsBoundedAndKeepsTheTail(t *testing.T) {
	const limit = 64 << 10
	r := newRunner(t, func(c *config.Exec) { c.OutputLimitBytes = limit })

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	res, err := r.Run(context.Background(), command("head -c 104857600 /dev/zero; printf 'THE END'"))
	runtime.ReadMemStats(&after)
	require.NoError(t, err)

	require.Equal(t, int32(0), res.GetExitCode(), res.GetError())
	require.Empty(t, res.GetError())
	require.True(t, res.GetOutputTruncated())
	require.Len(t, res.GetOutput(), limit)
	require.True(t, bytes.HasSuffix(res.GetOutput(), []byte("\x00THE END")), "the tail is kept")
	allocated := after.TotalAlloc - before.TotalAlloc
	require.Less(t, allocated, uint64(floodBytes/10), "reading the flood allocated %d bytes", allocated)
}

// Masking secrets keeps a flood bounded: 100 MiB read through the masker, a secret at
// its end, allocates a small fraction of the flood, and the secret is masked in the tail.
// Not parallel, so that the allocation count is this run's alone.
func TestOutputFloodWithSecretsIsBoundedAndMasked(t *testing.T) {
	const limit = 64 << 10
	r := newRunner(t, func(c *config.Exec) { c.OutputLimitBytes = limit })
	cmd := command(`head -c 104857600 /dev/zero; printf 'token=%s' "$API_TOKEN"`)
	cmd.Env = map[string]string{"API_TOKEN": "flood-s3cret-value"}
	cmd.SecretEnv = []string{"API_TOKEN"}

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	res, err := r.Run(context.Background(), cmd)
	runtime.ReadMemStats(&after)
	require.NoError(t, err)

	require.Equal(t, int32(0), res.GetExitCode(), res.GetError())
	require.Len(t, res.GetOutput(), limit)
	require.True(t, bytes.HasSuffix(res.GetOutput(), []byte("\x00token=***")), "the tail is kept, masked")
	allocated := after.TotalAlloc - before.TotalAlloc
	require.Less(t, allocated, uint64(floodBytes/10), "reading the flood allocated %d bytes", allocated)
}

// Output is bytes: NUL and bytes that are no UTF-8 come back exactly as printed.
func TestOutputBytesAreReturnedUnaltered(t *testing.T) {
	t.Parallel()
	r := newRunner(t, nil)
	res, err := r.Run(context.Background(), command(`printf 'a\000b\377\376\033[31mx\r\n'`))
	require.NoError(t, err)
	require.Equal(t, int32(0), res.GetExitCode())
	require.Equal(t, []byte("a\x00b\xff\xfe\x1b[31mx\r\n"), res.GetOutput())
	require.False(t, res.GetOutputTruncated())
}

// The agent's own error text is bounded and valid text: a working directory of 20 KiB
// that does not exist gives an error cut with a marker, not one quoting it all.
func TestAgentErrorTextIsBounded(t *testing.T) {
	t.Parallel()
	r := newRunner(t, nil)
	cmd := command("true")
	cmd.WorkingDir = "/" + strings.Repeat("\xffmissing", 20<<10/8)
	res, err := r.Run(context.Background(), cmd)
	require.NoError(t, err)
	require.Equal(t, int32(-1), res.GetExitCode())
	require.LessOrEqual(t, len(res.GetError()), safetext.MaxErrorBytes)
	require.Contains(t, res.GetError(), safetext.TruncatedMarker)
	require.True(t, strings.HasPrefix(res.GetError(), "working directory /\uFFFDmissing"), res.GetError())
	require.True(t, utf8.ValidString(res.GetError()))
}

package agent

import (
	"bytes"
	"encoding/base64"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/secretenv"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

// maskAll masks output written in the given pieces, flushed at the end.
func maskAll(t *testing.T, values []string, pieces ...string) string {
	t.Helper()
	var out bytes.Buffer
	m := newSecretMasker(&out, values)
	for _, p := range pieces {
		n, err := m.Write([]byte(p))
		require.NoError(t, err)
		require.Equal(t, len(p), n)
	}
	require.NoError(t, m.Flush())
	return out.String()
}

// Each value is masked, and so are its base64 (both alphabets, padded or not) and
// its URL encodings.
func TestMaskerMasksEveryForm(t *testing.T) {
	t.Parallel()
	const secret = "p@ss w/rd+?>~~" // differs in each encoding
	b := []byte(secret)
	forms := []string{secret,
		base64.StdEncoding.EncodeToString(b), base64.RawStdEncoding.EncodeToString(b),
		base64.URLEncoding.EncodeToString(b), base64.RawURLEncoding.EncodeToString(b),
		url.QueryEscape(secret), url.PathEscape(secret)}
	for _, form := range forms {
		require.Equal(t, "a=***;", maskAll(t, []string{secret}, "a="+form+";"), "form %q", form)
	}
	require.Equal(t, "***\n***\n", maskAll(t, []string{"first-secret", "second-secret"}, "first-secret\nsecond-secret\n"))
	require.Equal(t, "no secrets here\n", maskAll(t, []string{"first-secret"}, "no secrets here\n"))
	require.Equal(t, "as is", maskAll(t, nil, "as is"), "without secrets output passes")
}

// However the output is cut into writes, what comes out is the same: a value split
// across writes is masked whole.
func TestMaskerOutputDoesNotDependOnWrites(t *testing.T) {
	t.Parallel()
	values := []string{"hunter22", "abcdefabcdefXY", "abcdef"}
	stream := "x hunter2 hunter22 abcdefabcdefX abcdefabcdefXY hunter2" + base64.StdEncoding.EncodeToString([]byte("hunter22")) + " hun"
	whole := maskAll(t, values, stream)
	require.Equal(t, "x hunter2 *** ******X *** hunter2*** hun", whole)
	for i := range len(stream) + 1 {
		for j := i; j <= len(stream); j++ {
			require.Equal(t, whole, maskAll(t, values, stream[:i], stream[i:j], stream[j:]), "cut at %d and %d", i, j)
		}
	}
	for _, size := range []int{1, 2, 3} {
		var pieces []string
		for s := stream; s != ""; s = s[min(size, len(s)):] {
			pieces = append(pieces, s[:min(size, len(s))])
		}
		require.Equal(t, whole, maskAll(t, values, pieces...), "%d bytes a write", size)
	}
}

// A write's end is held back only while it may begin a pattern, and never more than
// the longest pattern less one byte.
func TestMaskerHoldsBackOnlyAPatternsStart(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	m := newSecretMasker(&out, []string{"secret-value"})
	_, _ = m.Write([]byte("line\nsecret-val"))
	require.Equal(t, "line\n", out.String())
	require.Len(t, m.held, len("secret-val"))
	_, _ = m.Write([]byte("id\n"))
	require.Equal(t, "line\nsecret-valid\n", out.String(), "not the secret after all")
	require.Empty(t, m.held)
	longest := len(m.patterns[0])
	_, _ = m.Write([]byte(strings.Repeat("s", 3*longest)))
	require.Less(t, len(m.held), longest)
}

// Values shorter than secretenv.MinMaskBytes are not masked, and named.
func TestShortSecretValuesAreNamed(t *testing.T) {
	t.Parallel()
	cmd := &mantisv1.Command{
		Env:       map[string]string{"LONG": "long-enough", "SHORT": "abc", "EMPTY": "", "PLAIN": "visible"},
		SecretEnv: []string{"EMPTY", "LONG", "MISSING", "SHORT"},
	}
	values, short := secretValues(cmd)
	require.Equal(t, []string{"long-enough"}, values)
	require.Equal(t, []string{"SHORT"}, short)
	require.Equal(t, 4, secretenv.MinMaskBytes)
}

// Masking a live stream allocates nothing once its buffers have grown.
func TestMaskerWritesWithoutAllocating(t *testing.T) {
	var sink bytes.Buffer
	m := newSecretMasker(&sink, []string{"a-secret-value", "another-one"})
	chunk := bytes.Repeat([]byte("output with a-secret-value and anoth"), 1000)
	allocs := testing.AllocsPerRun(100, func() {
		sink.Reset()
		_, _ = m.Write(chunk)
	})
	require.Zero(t, allocs)
}

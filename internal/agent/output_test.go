package agent

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// The tail buffer keeps exactly what a naive "append everything, cut at the
// end" would, whatever the sizes of the writes.
func TestTailBufferMatchesNaiveTail(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, limit := range []int{1, 7, 64, 1000} {
		tb := newTailBuffer(limit)
		var all []byte
		for i := range 500 {
			p := bytes.Repeat([]byte{byte('a' + i%26)}, rng.IntN(3*limit+1))
			n, err := tb.Write(p)
			require.NoError(t, err)
			require.Equal(t, len(p), n)
			all = append(all, p...)

			got, truncated := tb.Tail()
			want := all
			if len(want) > limit {
				want = want[len(want)-limit:]
			}
			require.Equal(t, want, got, "limit %d after write %d", limit, i)
			require.Equal(t, len(all) > limit, truncated)
			require.LessOrEqual(t, len(tb.buf), 2*limit, "memory stays bounded")
		}
	}
}

package workers

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/version"
)

func TestBinaryIDNamesOnlyBuildsWhoseCommitSaysWhatTheyHold(t *testing.T) {
	t.Parallel()
	id, ok := binaryID(version.Info{Version: "v1.4.0", Commit: "0123456789abcdef"})
	require.True(t, ok)
	require.Equal(t, "mantis v1.4.0 0123456789abcdef", id)

	for name, b := range map[string]version.Info{
		"uncommitted changes": {Version: "v1.4.0", Commit: "0123456789abcdef", Modified: true},
		"no commit recorded":  {Version: "v1.4.0", Commit: version.Unknown},
		"empty commit":        {Version: "v1.4.0"},
	} {
		_, ok := binaryID(b)
		require.False(t, ok, "%s: the SDK's checksum of the executable stays", name)
	}
}

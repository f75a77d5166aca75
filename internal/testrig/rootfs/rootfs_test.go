package rootfs_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/testrig/rootfs"
)

func TestKeyIgnoresOrderAndDuplicates(t *testing.T) {
	t.Parallel()
	require.Equal(t, rootfs.Key([]string{"curl", "bash"}), rootfs.Key([]string{"bash", "curl", "bash"}))
	require.NotEqual(t, rootfs.Key([]string{"bash"}), rootfs.Key([]string{"bash", "curl"}))
	require.True(t, strings.HasPrefix(rootfs.Key(nil), rootfs.Suite+"-"))
}

// TestDebianGivesEachTestItsOwnRoot runs a shell in two copies of one cached root:
// a file written in the first is not in the second.
func TestDebianGivesEachTestItsOwnRoot(t *testing.T) {
	first := rootfs.Debian(t)
	second := rootfs.Debian(t)
	require.NotEqual(t, first, second)
	require.Equal(t, "ok\n", rootfs.Run(t, first, "sh", "-c", "echo ok > /marker && cat /marker"))
	require.NoFileExists(t, filepath.Join(second, "marker"))
	b, err := os.ReadFile(filepath.Join(first, "etc", "debian_version"))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(b), "12."), "Debian 12, got %q", b)
}

package schema

import (
	"io/fs"
	"regexp"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestChannelsMatchTriggers checks that every channel a migration notifies is a
// Channel constant and that every constant is notified by some migration, so the
// NOTIFY and the LISTEN side cannot drift apart.
func TestChannelsMatchTriggers(t *testing.T) {
	notify := regexp.MustCompile(`pg_notify\('([a-z_]+)'`)
	var notified []Channel
	err := fs.WalkDir(migrationFiles, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(migrationFiles, path)
		if err != nil {
			return err
		}
		for _, m := range notify.FindAllSubmatch(b, -1) {
			notified = append(notified, Channel(m[1]))
		}
		return nil
	})
	require.NoError(t, err)
	slices.Sort(notified)
	notified = slices.Compact(notified)
	want := slices.Clone(Channels)
	slices.Sort(want)
	require.Equal(t, want, notified)
}

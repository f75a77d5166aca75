package version

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestResolveReadsTheBuildInformation(t *testing.T) {
	t.Parallel()
	bi := &debug.BuildInfo{
		GoVersion: "go1.26.0",
		Main:      debug.Module{Path: "github.com/mantis-deploy/mantis", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	info := resolve(bi, true, "", "")
	require.Equal(t, Info{Version: "v1.2.3", Commit: "0123456789abcdef0123", GoVersion: "go1.26.0", Modified: true}, info)
	require.Equal(t, "v1.2.3 (commit 0123456789ab+dirty, go1.26.0)", info.String())
}

func TestResolveLetsLdflagsWin(t *testing.T) {
	t.Parallel()
	bi := &debug.BuildInfo{
		GoVersion: "go1.26.0",
		Main:      debug.Module{Version: develVersion},
		Settings:  []debug.BuildSetting{{Key: "vcs.revision", Value: "aaaa"}, {Key: "vcs.modified", Value: "true"}},
	}
	info := resolve(bi, true, "v9.9.9", "bbbb")
	require.Equal(t, Info{Version: "v9.9.9", Commit: "bbbb", GoVersion: "go1.26.0"}, info)
}

func TestResolveWithoutBuildInformation(t *testing.T) {
	t.Parallel()
	info := resolve(nil, false, "", "")
	require.Equal(t, Info{Version: Unknown, Commit: Unknown, GoVersion: runtime.Version()}, info)
	info = resolve(&debug.BuildInfo{Main: debug.Module{Version: develVersion}}, true, "", "")
	require.Equal(t, Unknown, info.Version, "a checkout build has no version of its own")
}

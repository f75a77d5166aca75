// Package version says which build of Mantis is running: its version, the commit it
// was built from and the Go version that built it. Each binary (mandible, thorax,
// agent, mantisctl) prints it for --version (internal/cli.SetVersion), and each process
// serves it at /version and as mantis_build_info. It links the standard library only.
//
// The version and commit come from the module's build information (a `go install`
// of a tagged module, or a build in a VCS checkout); a release build overrides them:
//
//	go build -ldflags "-X github.com/mantis-deploy/mantis/internal/version.version=v1.4.0 \
//	  -X github.com/mantis-deploy/mantis/internal/version.commit=$(git rev-parse HEAD)" ./cmd/...
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// version and commit are set with -ldflags -X at release builds. They are package
// variables because -X can set nothing else; nothing assigns them at run time.
var (
	version string
	commit  string
)

// Unknown is printed for a version or commit the build did not record.
const Unknown = "unknown"

// develVersion is what the build information holds for a build of the main module
// from a checkout (not from a tagged module).
const develVersion = "(devel)"

// shortCommit is how many characters of the commit String prints.
const shortCommit = 12

// Info describes one build.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"go_version"`
	// Modified is set when the build's checkout had uncommitted changes.
	Modified bool `json:"modified,omitempty"`
}

// Get returns the running binary's build information, with the -ldflags overrides.
func Get() Info {
	bi, ok := debug.ReadBuildInfo()
	return resolve(bi, ok, version, commit)
}

// resolve combines the build information with the -ldflags overrides, which win.
func resolve(bi *debug.BuildInfo, ok bool, ldVersion, ldCommit string) Info {
	info := Info{Version: Unknown, Commit: Unknown, GoVersion: runtime.Version()}
	if ok && bi != nil {
		if v := bi.Main.Version; v != "" && v != develVersion {
			info.Version = v
		}
		if bi.GoVersion != "" {
			info.GoVersion = bi.GoVersion
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.Commit = s.Value
			case "vcs.modified":
				info.Modified = s.Value == "true"
			}
		}
	}
	if ldVersion != "" {
		info.Version = ldVersion
	}
	if ldCommit != "" {
		info.Commit, info.Modified = ldCommit, false
	}
	return info
}

// String renders the build on one line: "v1.4.0 (commit 0123456789ab, go1.26.0)",
// the commit followed by "+dirty" when the checkout had uncommitted changes.
func (i Info) String() string {
	c := i.Commit
	if len(c) > shortCommit {
		c = c[:shortCommit]
	}
	if i.Modified {
		c += "+dirty"
	}
	return fmt.Sprintf("%s (commit %s, %s)", i.Version, c, i.GoVersion)
}

// String is the running binary's build on one line (see Info.String).
func String() string { return Get().String() }

package workers

import (
	"sync"

	"go.temporal.io/sdk/worker"

	"github.com/mantis-deploy/mantis/internal/version"
)

// setBinaryID names this binary to Temporal (its workers' build id, recorded with each
// workflow task they complete and offered as a reset point) by the commit it was built
// from, once, before the first worker starts. Without a name the SDK reads the whole
// executable through MD5 at the first worker's start: about 0.6 s of CPU for Mandible,
// paid again by every replica that starts. A build from a checkout with uncommitted
// changes, or without a recorded commit, keeps the SDK's checksum: its commit does not
// say which code it holds.
var setBinaryID = sync.OnceFunc(func() {
	if id, ok := binaryID(version.Get()); ok {
		worker.SetBinaryChecksum(id)
	}
})

// binaryID is the name of a build: its version and commit, when the commit says
// what the build holds.
func binaryID(b version.Info) (string, bool) {
	if b.Commit == version.Unknown || b.Commit == "" || b.Modified {
		return "", false
	}
	return "mantis " + b.Version + " " + b.Commit, true
}

// Command release builds a Mantis release into a dist directory: static binaries
// for linux/amd64 and linux/arm64 (CGO_ENABLED=0, -trimpath, the version and commit
// stamped by the linker flags it is given), a tarball of them per architecture, .deb
// and .rpm packages (mantis-agent, mantis-mandible, mantis-thorax, mantis-cli) made
// with nfpm, a CycloneDX SBOM read from the binaries' embedded build information,
// and SHA256SUMS over all of it. It refuses a version that CHANGELOG.md has no
// "## [x.y.z]" section for.
//
//	make release VERSION=x.y.z
//	(cd tools/release && go run . -repo ../.. -version x.y.z -commit HASH -ldflags '...' -dist DIR)
//
// It is a module of its own, so that nfpm and its dependencies stay out of the
// Mantis module that the binaries are built from.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"time"
)

// Arches are the architectures a release is built for.
var Arches = []string{"amd64", "arm64"}

// options are the command line's.
type options struct {
	Repo    string
	Version string
	Commit  string
	LDFlags string
	Dist    string
	// MTime is every packaged file's time: SOURCE_DATE_EPOCH, else now.
	MTime time.Time
}

func main() {
	var o options
	flag.StringVar(&o.Repo, "repo", "../..", "the Mantis repository's root")
	flag.StringVar(&o.Version, "version", "", "the release's version, x.y.z (a CHANGELOG.md section)")
	flag.StringVar(&o.Commit, "commit", "unknown", "the commit built")
	flag.StringVar(&o.LDFlags, "ldflags", "", "linker flags of every binary (the Makefile's LDFLAGS: version and commit)")
	flag.StringVar(&o.Dist, "dist", "dist", "the directory to write, emptied first")
	flag.Parse()
	o.MTime = sourceDate()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

// versionPattern is a release version: x.y.z, optionally with a pre-release.
var versionPattern = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?$`)

func run(o options) error {
	if !versionPattern.MatchString(o.Version) {
		return fmt.Errorf("VERSION %q is not x.y.z: make release VERSION=x.y.z", o.Version)
	}
	changelog, err := os.ReadFile(filepath.Join(o.Repo, "CHANGELOG.md"))
	if err != nil {
		return err
	}
	if !HasSection(string(changelog), o.Version) {
		return fmt.Errorf("CHANGELOG.md has no \"## [%s]\" section: write the release's notes first", o.Version)
	}
	if err := os.RemoveAll(o.Dist); err != nil {
		return err
	}
	work := filepath.Join(o.Dist, ".work")
	var binaries []string
	for _, arch := range Arches {
		bins, err := buildBinaries(o, arch, filepath.Join(work, arch, "bin"))
		if err != nil {
			return err
		}
		if err := writeTarball(o, arch, bins); err != nil {
			return err
		}
		if err := writePackages(o, arch, bins, work); err != nil {
			return err
		}
		for _, b := range bins {
			binaries = append(binaries, b)
		}
	}
	if err := writeSBOM(o, binaries); err != nil {
		return err
	}
	if err := os.RemoveAll(work); err != nil {
		return err
	}
	return writeChecksums(o.Dist)
}

// HasSection reports whether changelog has a "## [version]" heading.
func HasSection(changelog, version string) bool {
	return regexp.MustCompile(`(?m)^## \[` + regexp.QuoteMeta(version) + `\]`).MatchString(changelog)
}

// sourceDate is SOURCE_DATE_EPOCH as a time (the Makefile sets the commit's), else now.
func sourceDate() time.Time {
	var sec int64
	if _, err := fmt.Sscan(os.Getenv("SOURCE_DATE_EPOCH"), &sec); err == nil && sec > 0 {
		return time.Unix(sec, 0).UTC()
	}
	return time.Now().UTC().Truncate(time.Second)
}

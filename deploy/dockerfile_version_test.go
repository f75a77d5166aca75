package deploy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// versionPackage is the package whose variables the image's linker flags set.
const versionPackage = "github.com/mantis-deploy/mantis/internal/version"

// linkerStamps returns the -X flags of the build stage's go build, in order.
func linkerStamps(t *testing.T) []string {
	t.Helper()
	_, stages := parseDockerfile(t, "Dockerfile")
	var stamps []string
	for _, in := range stages[0].Body {
		if in.Cmd != "RUN" {
			continue
		}
		for _, m := range regexp.MustCompile(`-X\s+(\S+)`).FindAllStringSubmatch(in.Args, -1) {
			stamps = append(stamps, strings.Trim(m[1], `"`))
		}
	}
	return stamps
}

// TestDockerfileStampsTheVersion builds the agent with the image's own -X flags (the
// build arguments VERSION and REVISION substituted) and checks that --version prints
// them: an image built with --build-arg VERSION=v1.4.0 says v1.4.0, not "unknown".
func TestDockerfileStampsTheVersion(t *testing.T) {
	t.Parallel()
	stamps := linkerStamps(t)
	require.ElementsMatch(t, []string{
		versionPackage + ".version=${VERSION}",
		versionPackage + ".commit=${REVISION}",
	}, stamps, "the build stage passes VERSION and REVISION to the linker")

	const wantVersion, wantRevision = "v9.8.7-imagecheck", "0123456789abcdef0123"
	args := map[string]string{"VERSION": wantVersion, "REVISION": wantRevision}
	var ldflags []string
	for _, s := range stamps {
		ldflags = append(ldflags, "-X", os.Expand(s, func(k string) string { return args[k] }))
	}
	bin := filepath.Join(t.TempDir(), "agent")
	build := exec.Command("go", "build", "-ldflags", strings.Join(ldflags, " "), "-o", bin, "../cmd/agent")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "building the agent with the image's linker flags: %s", out)
	out, err = exec.Command(bin, "--version").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), wantVersion)
	require.Contains(t, string(out), "commit "+wantRevision[:12])
}

package helmtest

import (
	"bufio"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// dockerfile is the Dockerfile that builds both images the chart runs.
const dockerfile = "../../Dockerfile"

// imageStage is what the Dockerfile says of one image: the stage's base image and
// whether the image has a shell.
type imageStage struct {
	Base     string
	HasShell bool
}

// dockerImages reads deploy/Dockerfile: each stage carrying an
// org.opencontainers.image.title label, by that title, with its FROM (global ARG
// defaults substituted). A Debian stage has a shell when bash is in the package
// list it installs (deploy/agent-packages.txt); distroless static has none.
func dockerImages(t *testing.T) map[string]imageStage {
	t.Helper()
	b, err := os.ReadFile(dockerfile)
	require.NoError(t, err)
	args := map[string]string{}
	images := map[string]imageStage{}
	var base string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 2 && f[0] == "ARG" && base == "":
			k, v, _ := strings.Cut(f[1], "=")
			args[k] = v
		case len(f) >= 2 && f[0] == "FROM":
			base = os.Expand(f[1], func(k string) string { return args[k] })
		case strings.Contains(line, `org.opencontainers.image.title="`):
			_, rest, _ := strings.Cut(line, `org.opencontainers.image.title="`)
			title, _, _ := strings.Cut(rest, `"`)
			images[title] = imageStage{Base: base, HasShell: strings.HasPrefix(base, "debian:") && agentPackagesHaveBash(t)}
		}
	}
	return images
}

func agentPackagesHaveBash(t *testing.T) bool {
	t.Helper()
	f, err := os.Open("../../agent-packages.txt")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		if strings.TrimSpace(line) == "bash" {
			return true
		}
	}
	return false
}

// checkImages checks which image each container runs: the agents the agent image,
// built on Debian with a shell (the agent runs every command as /bin/sh -c);
// Mandible and Thorax the distroless image, which has none.
func checkImages(t *testing.T, m *manifests) {
	t.Helper()
	images := dockerImages(t)
	require.Contains(t, images, "mantis")
	require.Contains(t, images, "mantis-agent")
	for name, d := range m.Deployments {
		for _, c := range d.Spec.Template.Spec.Containers {
			repo, _, _ := strings.Cut(c.Image, ":")
			title := repo[strings.LastIndex(repo, "/")+1:]
			img, ok := images[title]
			require.True(t, ok, "%s runs %s, which deploy/Dockerfile does not build", name, c.Image)
			if d.Spec.Template.Labels[componentLabel] == "agent" {
				require.Equal(t, "mantis-agent", title, "%s: agents run the agent image", name)
				require.True(t, img.HasShell, "%s: the agent image has a shell (%s with bash)", name, img.Base)
			} else {
				require.Equal(t, "mantis", title, "%s: Mandible and Thorax run the distroless image", name)
				require.False(t, img.HasShell, "%s: %s", name, img.Base)
				require.Contains(t, img.Base, "distroless/static", "%s", name)
			}
		}
	}
}

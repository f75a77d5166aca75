package e2e_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/identity"
	"github.com/mantis-deploy/mantis/internal/testrig/rootfs"
	"github.com/mantis-deploy/mantis/schema"
)

// releasePackage is what a package of make release installs.
type releasePackage struct {
	Name, Binary, Unit, Config string
}

var releasePackages = []releasePackage{
	{Name: "mantis-agent", Binary: "/usr/bin/mantis-agent", Unit: "mantis-agent.service", Config: "/etc/mantis/agent.toml"},
	{Name: "mantis-mandible", Binary: "/usr/bin/mantis-mandible", Unit: "mantis-mandible.service", Config: "/etc/mantis/mandible.toml"},
	{Name: "mantis-thorax", Binary: "/usr/bin/mantis-thorax", Unit: "mantis-thorax.service", Config: "/etc/mantis/thorax.toml"},
	{Name: "mantis-cli", Binary: "/usr/bin/mantisctl"},
}

// releaseUnitDir is where the packages install their systemd units.
const releaseUnitDir = "/usr/lib/systemd/system"

// releaseUnderTest is the dist directory and version make release-check built; the
// test is skipped without them.
func releaseUnderTest(t *testing.T) (dist, version string) {
	t.Helper()
	dist, version = os.Getenv("MANTIS_RELEASE_DIST"), os.Getenv("MANTIS_RELEASE_VERSION")
	if dist == "" || version == "" {
		t.Skip("make release-check runs this test on the release it builds (MANTIS_RELEASE_DIST, MANTIS_RELEASE_VERSION)")
	}
	return dist, version
}

// TestReleaseDebInstallsWithoutSystemdAndRunsACommand installs the release's .deb
// packages into a Debian 12 root under chroot, where no systemd runs (dpkg -i, their
// scripts included), then starts the installed agent with the installed
// /etc/mantis/agent.toml (the environment names the target, its Thorax and its
// certificate, as /etc/mantis/agent.env would) against a Thorax and Mandible of
// the test stack: a dispatched command runs in the root, and Mandible stores its
// result.
func TestReleaseDebInstallsWithoutSystemdAndRunsACommand(t *testing.T) {
	dist, version := releaseUnderTest(t)
	rootfs.Require(t)
	root := installReleaseDebs(t, dist, version)

	c := setupExecCluster(t, 10*time.Second)
	th := c.startThorax(t)
	instance := c.waitRegistered(t, th)
	name := uniqueName("pkg")
	cert, key := c.issue(t, identity.RoleAgent, name)
	certs := filepath.Join(root, "etc/mantis/certs")
	require.NoError(t, os.MkdirAll(certs, 0o750))
	for src, dst := range map[string]string{c.certs.CACert(): "ca.crt", cert: "agent.crt", key: "agent.key"} {
		b, err := os.ReadFile(src)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(certs, dst), b, 0o600))
	}
	cmd := rootfs.Command(root, "/usr/bin/mantis-agent", "--config", "/etc/mantis/agent.toml")
	cmd.Env = append(cmd.Env,
		"MANTIS_NAME="+name,
		"MANTIS_THORAX_ADDRESS="+th.AgentsAddr,
		"MANTIS_THORAX_CA_CERT_PATH=/etc/mantis/certs/ca.crt",
		"MANTIS_THORAX_CERT_PATH=/etc/mantis/certs/agent.crt",
		"MANTIS_THORAX_KEY_PATH=/etc/mantis/certs/agent.key",
	)
	agent := c.runProcess(t, name, cmd)
	c.waitPollTarget(t, agent, instance)

	req := c.enqueue(t, schema.NewDispatchRequest{
		Target:  name,
		Command: `echo "debian $(cut -d. -f1 /etc/debian_version), $(command -v mantis-agent)"`,
		Timeout: time.Minute,
	})
	got := c.waitCommand(t, req, 2*time.Minute, "succeeded", "failed")
	require.Equal(t, "succeeded", got.Status, "agent log:\n%s", agent.log())
	require.NotNil(t, got.Output)
	require.Equal(t, "debian 12, /usr/bin/mantis-agent\n", *got.Output, "the command ran in the root, by the installed agent")
	require.DirExists(t, filepath.Join(root, "var/lib/mantis/agent", name, "journal"),
		"the journal in its default place for an agent run as root")
}

// installReleaseDebs installs the .deb packages of this machine's architecture into
// a fresh Debian 12 root and checks what they installed. mantis-agent goes first
// into a root with no systemctl at all; the others with a systemctl that fails, as
// on a host with systemd installed but not running it, and with
// /run/systemd/system present so that their scripts call it and must bear its
// failure.
func installReleaseDebs(t *testing.T, dist, version string) string {
	t.Helper()
	root := rootfs.Debian(t)
	require.NoFileExists(t, filepath.Join(root, "usr/bin/systemctl"), "the root has no systemd")
	debs := filepath.Join(root, "tmp/debs")
	require.NoError(t, os.MkdirAll(debs, 0o755))
	deb := func(name string) string {
		file := fmt.Sprintf("%s_%s-1_%s.deb", name, version, runtime.GOARCH)
		b, err := os.ReadFile(filepath.Join(dist, file))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(debs, file), b, 0o644))
		return "/tmp/debs/" + file
	}
	rootfs.Run(t, root, "dpkg", "-i", deb("mantis-agent"))
	require.Contains(t, rootfs.Run(t, root, "mantis-agent", "--version"), version)

	fake := "#!/bin/sh\necho \"systemctl $*\" >> /tmp/systemctl.calls\necho 'System has not been booted with systemd' >&2\nexit 1\n"
	require.NoError(t, os.WriteFile(filepath.Join(root, "usr/local/bin/systemctl"), []byte(fake), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "run/systemd/system"), 0o755))
	rootfs.Run(t, root, "dpkg", "-i", deb("mantis-mandible"), deb("mantis-thorax"), deb("mantis-cli"))
	calls, err := os.ReadFile(filepath.Join(root, "tmp/systemctl.calls"))
	require.NoError(t, err)
	require.Contains(t, string(calls), "systemctl daemon-reload")
	rootfs.Run(t, root, "dpkg", "-r", "mantis-cli")
	rootfs.Run(t, root, "dpkg", "-i", deb("mantis-cli"))
	require.NoError(t, os.RemoveAll(filepath.Join(root, "run/systemd")))

	require.Contains(t, rootfs.Run(t, root, "getent", "group", "mantis"), "mantis:")
	require.Contains(t, rootfs.Run(t, root, "getent", "passwd", "mantis"), ":/var/lib/mantis:/usr/sbin/nologin")
	for _, p := range releasePackages {
		require.FileExists(t, filepath.Join(root, p.Binary), p.Name)
		require.Contains(t, rootfs.Run(t, root, p.Binary, "--version"), version, p.Name)
		if p.Unit == "" {
			continue
		}
		unit, err := os.ReadFile(filepath.Join(root, releaseUnitDir, p.Unit))
		require.NoError(t, err)
		require.Contains(t, string(unit), "\nExecStart="+p.Binary+" --config "+p.Config+"\n", p.Unit)
		conffiles := rootfs.Run(t, root, "dpkg-query", "-W", "-f=${Conffiles}\n", p.Name)
		require.Contains(t, conffiles, p.Config, "%s keeps an edited %s across upgrades", p.Name, p.Config)
	}
	return root
}

// TestReleaseRPMsAndManifests reads the release's .rpm packages with rpm (their
// metadata, files, config files and scripts), checks SHA256SUMS with sha256sum -c,
// and reads the SBOM and the tarballs.
func TestReleaseRPMsAndManifests(t *testing.T) {
	t.Parallel()
	dist, version := releaseUnderTest(t)
	_, err := exec.LookPath("rpm")
	require.NoError(t, err, "rpm missing: make release-check installs it")
	for _, arch := range []string{"x86_64", "aarch64"} {
		for _, p := range releasePackages {
			file := filepath.Join(dist, fmt.Sprintf("%s-%s-1.%s.rpm", p.Name, version, arch))
			info := runTool(t, "rpm", "-qip", file)
			require.Regexp(t, `(?m)^Name\s*: `+p.Name+`$`, info)
			require.Regexp(t, `(?m)^Version\s*: `+strings.ReplaceAll(version, ".", `\.`)+`$`, info)
			require.Regexp(t, `(?m)^Architecture\s*: `+arch+`$`, info)
			list := strings.Fields(runTool(t, "rpm", "-qlp", file))
			require.Contains(t, list, p.Binary, file)
			if p.Unit == "" {
				continue
			}
			require.Contains(t, list, releaseUnitDir+"/"+p.Unit, file)
			require.Equal(t, []string{p.Config}, strings.Fields(runTool(t, "rpm", "-qcp", file)), "%s: config files", file)
			scripts := runTool(t, "rpm", "-qp", "--scripts", file)
			require.Contains(t, scripts, "useradd --system", file)
			require.Contains(t, scripts, "[ -d /run/systemd/system ]", "%s: systemctl only where systemd runs", file)
		}
	}
	sums := exec.Command("sha256sum", "--strict", "-c", "SHA256SUMS")
	sums.Dir = dist
	out, err := sums.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Equal(t, 2*2*len(releasePackages)+2+1, strings.Count(string(out), ": OK"),
		"every package, both tarballs and the SBOM:\n%s", out)
	checkReleaseSBOM(t, filepath.Join(dist, "mantis_"+version+".cdx.json"))
	for _, arch := range []string{"amd64", "arm64"} {
		prefix := fmt.Sprintf("mantis_%s_linux_%s", version, arch)
		listing := runTool(t, "tar", "-tzf", filepath.Join(dist, prefix+".tar.gz"))
		for _, p := range releasePackages {
			require.Contains(t, listing, prefix+"/bin/"+filepath.Base(p.Binary))
		}
	}
}

// checkReleaseSBOM reads the CycloneDX SBOM: each binary of each architecture
// depends on the modules it links, gRPC among them.
func checkReleaseSBOM(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var bom struct {
		BOMFormat  string `json:"bomFormat"`
		Components []struct {
			Type, Name, Version, PURL string
		} `json:"components"`
		Dependencies []struct {
			Ref       string   `json:"ref"`
			DependsOn []string `json:"dependsOn"`
		} `json:"dependencies"`
	}
	require.NoError(t, json.Unmarshal(b, &bom))
	require.Equal(t, "CycloneDX", bom.BOMFormat)
	require.Len(t, bom.Dependencies, 2*len(releasePackages))
	var grpc bool
	for _, c := range bom.Components {
		grpc = grpc || (c.Name == "google.golang.org/grpc" && strings.HasPrefix(c.PURL, "pkg:golang/google.golang.org/grpc@v"))
	}
	require.True(t, grpc, "the SBOM lists google.golang.org/grpc with its version")
	for _, d := range bom.Dependencies {
		require.NotEmpty(t, d.DependsOn, d.Ref)
	}
}

func runTool(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	require.NoError(t, err, "%s %s: %s", name, strings.Join(args, " "), out)
	return string(out)
}

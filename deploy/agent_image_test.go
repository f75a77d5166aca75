package deploy_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/mantis-deploy/mantis/internal/devcerts"
	"github.com/mantis-deploy/mantis/internal/identity"
	"github.com/mantis-deploy/mantis/internal/testrig/devstack"
	"github.com/mantis-deploy/mantis/internal/testrig/rootfs"
	"github.com/mantis-deploy/mantis/internal/tlsconf"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

// agentPackagesFile is the agent image's package list, read by the Dockerfile's
// agent stage and by the test that rebuilds its root file system.
const agentPackagesFile = "agent-packages.txt"

// agentPackages reads agent-packages.txt as the Dockerfile's RUN does: each line
// less its comment, blank lines dropped.
func agentPackages(t *testing.T) []string {
	t.Helper()
	f, err := os.Open(agentPackagesFile)
	require.NoError(t, err)
	defer f.Close()
	var pkgs []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		pkgs = append(pkgs, strings.Fields(line)...)
	}
	require.NoError(t, sc.Err())
	return pkgs
}

// agentStage returns the Dockerfile's stage named "agent".
func agentStage(t *testing.T) dockerStage {
	t.Helper()
	_, stages := parseDockerfile(t, "Dockerfile")
	for _, st := range stages {
		if st.Name == "agent" {
			return st
		}
	}
	t.Fatal("deploy/Dockerfile has no stage named agent")
	return dockerStage{}
}

// TestAgentImageHasAShellAndOnePackageList holds the agent stage to its rules: Debian
// 12 slim, pinned; the packages of agent-packages.txt and no other list; a shell; a
// numeric non-root user; the agent and the health probe from the build stage only.
// The default image stays distroless, with no shell.
func TestAgentImageHasAShellAndOnePackageList(t *testing.T) {
	t.Parallel()
	_, stages := parseDockerfile(t, "Dockerfile")
	require.Contains(t, stages[len(stages)-1].Image, "gcr.io/distroless/static-debian12",
		"Mandible and Thorax keep the distroless image, the default (last) stage")
	st := agentStage(t)
	require.Regexp(t, `^debian:12(\.[0-9]+)*-slim$`, st.Image, "the agent image is Debian 12 slim, pinned")
	byCmd := map[string][]string{}
	for _, in := range st.Body {
		byCmd[in.Cmd] = append(byCmd[in.Cmd], in.Args)
	}
	require.Contains(t, byCmd["COPY"], "deploy/"+agentPackagesFile+" /tmp/"+agentPackagesFile)
	run := strings.Join(strings.Fields(strings.Join(byCmd["RUN"], "\n")), " ")
	require.Regexp(t, regexp.QuoteMeta("/tmp/"+agentPackagesFile+" |")+`( [A-Z_]+=\S+)* xargs apt-get install -y --no-install-recommends &&`, run,
		"the stage installs the list of %s and nothing else", agentPackagesFile)
	require.Equal(t, 1, strings.Count(run, "apt-get install"), "one package list")
	require.Contains(t, agentPackages(t), "bash")
	require.Contains(t, agentPackages(t), "ca-certificates")

	users := byCmd["USER"]
	require.NotEmpty(t, users)
	require.Equal(t, "65532:65532", users[len(users)-1], "the distroless image's non-root uid and gid")
	require.Equal(t, []string{`["/usr/local/bin/agent"]`}, byCmd["ENTRYPOINT"])
	require.Len(t, byCmd["HEALTHCHECK"], 1)
	require.Contains(t, strings.Join(byCmd["LABEL"], " "), `org.opencontainers.image.title="mantis-agent"`)
	var fromBuild []string
	for _, args := range byCmd["COPY"] {
		if strings.HasPrefix(args, "--from=") {
			fromBuild = append(fromBuild, args)
		}
	}
	require.Equal(t, []string{"--from=build /out/agent /out/mantis-healthcheck /usr/local/bin/"}, fromBuild)
}

// TestAgentImageRunsACommandUnderChroot builds the agent image's root file system
// without a container engine (debootstrap of Debian 12 with agent-packages.txt),
// copies in the agent built as the image builds it, and runs it under chroot as
// uid 65532 in listen mode; a client holding Thorax's certificate of the same
// development CA then has it run sh -c 'echo ok' and a check of the tools.
func TestAgentImageRunsACommandUnderChroot(t *testing.T) {
	rootfs.Require(t)
	root := rootfs.Debian(t, agentPackages(t)...)
	agent := buildStaticAgent(t)
	require.NoError(t, copyFile(agent, filepath.Join(root, "usr/local/bin/agent"), 0o755))

	certs, err := devcerts.Generate(filepath.Join(root, "etc/mantis/certs"), []string{"127.0.0.1"})
	require.NoError(t, err)
	cert, key, err := certs.Issue(identity.RoleAgent, "image-1", []string{"127.0.0.1"})
	require.NoError(t, err)
	journal := filepath.Join(root, "var/lib/mantis/agent")
	// As the image's RUN makes it: /var/lib/mantis/agent, 0700, of 65532.
	require.NoError(t, os.MkdirAll(journal, 0o755))
	require.NoError(t, os.Chmod(journal, 0o700))
	for _, p := range []string{journal, key} {
		require.NoError(t, os.Chown(p, 65532, 65532))
	}
	port, err := devstack.FreePort(false)
	require.NoError(t, err)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	inRoot := func(p string) string { return strings.TrimPrefix(p, root) }
	conf := fmt.Sprintf(`name = "image-1"
mode = "listen"
[listen]
address = %q
ca_cert_path = %q
cert_path = %q
key_path = %q
[journal]
dir = "/var/lib/mantis/agent/journal"
`, addr, inRoot(certs.CACert()), inRoot(cert), inRoot(key))
	require.NoError(t, os.WriteFile(filepath.Join(root, "etc/mantis/agent.toml"), []byte(conf), 0o644))

	log := startChrootAgent(t, root)
	if !assert.Eventually(t, func() bool { return strings.Contains(log(), "serving agent service") },
		60*time.Second, 100*time.Millisecond) {
		t.Fatalf("the agent never served; its log:\n%s", log())
	}

	thoraxCert, thoraxKey := certs.Pair("thorax")
	tc, err := tlsconf.Client(tlsconf.Files{CA: certs.CACert(), Cert: thoraxCert, Key: thoraxKey}, "")
	require.NoError(t, err)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	client := mantisv1.NewAgentServiceClient(conn)
	for cmd, want := range map[string]string{
		`sh -c 'echo ok'`: "ok\n",
		`id -u; for t in bash curl jq tar gzip ps ssh rsync; do command -v "$t" >/dev/null || echo "missing $t"; done`: "65532\n",
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		resp, err := client.RunCommand(ctx, &mantisv1.RunCommandRequest{Command: &mantisv1.Command{
			Id: uuid.NewString(), DispatchRequestId: uuid.NewString(),
			Target: "image-1", Mode: "listen", Command: cmd, Timeout: durationpb.New(20 * time.Second),
		}})
		cancel()
		require.NoError(t, err, "agent log:\n%s", log())
		require.Equal(t, int32(0), resp.Result.ExitCode, "%s: %s %s", cmd, resp.Result.Output, resp.Result.Error)
		require.Equal(t, want, string(resp.Result.Output), cmd)
	}
}

// buildStaticAgent builds ./cmd/agent as the Dockerfile's build stage does
// (CGO_ENABLED=0, -trimpath) and returns its path.
func buildStaticAgent(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "agent")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", out, "../cmd/agent")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", b)
	return out
}

// startChrootAgent runs the root's agent under chroot as 65532:65532 with
// /etc/mantis/agent.toml, stopped when the test ends; log returns its output.
func startChrootAgent(t *testing.T, root string) (log func() string) {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "agent.log")
	logFile, err := os.Create(logPath)
	require.NoError(t, err)
	cmd := rootfs.Command(root, "/usr/local/bin/agent", "--config", "/etc/mantis/agent.toml")
	cmd.Args = append([]string{"chroot", "--userspec=65532:65532"}, cmd.Args[1:]...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); logFile.Close(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	return func() string { b, _ := os.ReadFile(logPath); return string(b) }
}

func copyFile(src, dst string, mode os.FileMode) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, mode)
}

package devstack

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"log/slog"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
)

// temporalCLIVersion is the CLI whose dev server the stack runs; newer versions cannot be
// installed with `go install` because of a replace directive in their module.
const temporalCLIVersion = "v1.5.1"

// TemporalPorts are the dev server's listeners.
type temporalPorts struct {
	Frontend, UI, HTTP, Metrics int
}

// findTemporal locates the temporal CLI on PATH or in GOBIN/GOPATH/bin.
func findTemporal() (string, error) {
	if p, err := exec.LookPath("temporal"); err == nil {
		return p, nil
	}
	for _, dir := range goBinDirs() {
		p := filepath.Join(dir, "temporal")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	return "", fmt.Errorf("temporal CLI: %w", errNotFound)
}

// TemporalCLI is the path of the temporal CLI the stack runs.
func TemporalCLI() (string, error) { return findTemporal() }

// goBinDirs lists where `go install` puts binaries.
func goBinDirs() []string {
	var dirs []string
	if out, err := exec.Command("go", "env", "GOBIN", "GOPATH").Output(); err == nil {
		lines := splitLines(string(out))
		if len(lines) > 0 && lines[0] != "" {
			dirs = append(dirs, lines[0])
		}
		if len(lines) > 1 {
			for _, p := range filepath.SplitList(lines[1]) {
				dirs = append(dirs, filepath.Join(p, "bin"))
			}
		}
	}
	if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(home, "go", "bin"))
	}
	return dirs
}

func (s *Stack) startTemporal(ctx context.Context, dir string, ports temporalPorts) error {
	bin, err := findTemporal()
	if err != nil {
		return fmt.Errorf("%w (run `make tools`)", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	args := []string{"server", "start-dev",
		"--ip", "127.0.0.1",
		"--port", strconv.Itoa(ports.Frontend),
		"--ui-port", strconv.Itoa(ports.UI),
		"--http-port", strconv.Itoa(ports.HTTP),
		"--metrics-port", strconv.Itoa(ports.Metrics),
		"--db-filename", filepath.Join(dir, "temporal.db"),
		"--namespace", "default",
		"--log-level", "warn",
		// Activities scheduled on the worker's own task queue start without another poll
		// round trip: the dispatcher's claim and delivery are such activities.
		"--dynamic-config-value", "system.enableActivityEagerExecution=true",
	}
	if s.opts.UICodecEndpoint != "" {
		args = append(args, "--ui-codec-endpoint", s.opts.UICodecEndpoint)
	}
	p, err := startProcess(s.logger, processSpec{
		Name: "temporal", Path: bin, Args: args, Dir: dir,
		LogPath: filepath.Join(s.opts.Dir, "logs", "temporal.log"),
	})
	if err != nil {
		return err
	}
	s.track(p)
	addr := fmt.Sprintf("127.0.0.1:%d", ports.Frontend)
	err = waitFor(ctx, p, 90*time.Second, func(ctx context.Context) error {
		c, err := client.Dial(client.Options{HostPort: addr, Namespace: "default", Logger: tlog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "default"})
		return err
	})
	if err != nil {
		return err
	}
	s.Env["TEMPORAL_ADDRESS"] = addr
	s.Env["TEMPORAL_NAMESPACE"] = "default"
	s.Env["TEMPORAL_UI_URL"] = fmt.Sprintf("http://127.0.0.1:%d", ports.UI)
	return nil
}

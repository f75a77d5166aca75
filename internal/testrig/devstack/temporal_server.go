package devstack

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"text/template"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"google.golang.org/protobuf/types/known/durationpb"
)

// The production Temporal server the stack can run in place of the dev server
// (Options.TemporalServer): temporal-server with PostgreSQL persistence and SQL
// visibility in the stack's own PostgreSQL, and the Web UI server in front of it.
const (
	// TemporalServerVersion is the temporal-server and temporal-sql-tool release.
	TemporalServerVersion = "v1.29.1"
	// TemporalUIVersion is the Web UI server release (the one the pinned CLI embeds).
	TemporalUIVersion = "v2.42.1"

	temporalRole               = "temporal"
	temporalDatabase           = "temporal"
	temporalVisibilityDatabase = "temporal_visibility"
	// temporalPlugin is the persistence plugin; its embedded schemas set up both databases.
	temporalPlugin = "postgres12"
	// temporalNamespaceRetention is how long the stack's namespace keeps closed workflows.
	temporalNamespaceRetention = 72 * time.Hour
)

var (
	//go:embed temporal_server.yaml.tmpl
	temporalServerConfig string
	//go:embed temporal_ui.yaml.tmpl
	temporalUIConfig string
	//go:embed temporal_dynamic.yaml
	temporalDynamicConfig []byte
	//go:embed sql/database_exists.sql
	databaseExistsSQL string
	//go:embed sql/schema_versioned.sql
	schemaVersionedSQL string
)

// goTool is a binary the stack installs with `go install`, each release into a
// directory of its own, because two of them are called "server".
type goTool struct {
	Name, Package, Binary, Version string
}

var (
	temporalServerTool = goTool{"temporal-server", "go.temporal.io/server/cmd/server", "server", TemporalServerVersion}
	temporalSQLTool    = goTool{"temporal-sql-tool", "go.temporal.io/server/cmd/tools/sql", "sql", TemporalServerVersion}
	temporalUITool     = goTool{"temporal-ui-server", "github.com/temporalio/ui-server/v2/cmd/server", "server", TemporalUIVersion}
)

// toolsDir is where the stack's go-installed tools live: GOPATH/bin/mantis-tools.
func toolsDir() string {
	dirs := goBinDirs()
	if len(dirs) == 0 {
		return filepath.Join(os.TempDir(), "mantis-tools")
	}
	return filepath.Join(dirs[len(dirs)-1], "mantis-tools")
}

// path is where the tool's binary is once installed.
func (t goTool) path() string {
	return filepath.Join(toolsDir(), t.Name+"@"+t.Version, t.Binary)
}

// installed reports whether the tool's binary is in place.
func (t goTool) installed() bool {
	st, err := os.Stat(t.path())
	return err == nil && !st.IsDir()
}

// install builds the tool unless it is already in place.
func (t goTool) install(ctx context.Context, logger *slog.Logger) error {
	if t.installed() {
		return nil
	}
	logger.Info("installing "+t.Name+" (first time only, takes several minutes)", "version", t.Version)
	cmd := exec.CommandContext(ctx, "go", "install", t.Package+"@"+t.Version)
	cmd.Env = append(os.Environ(), "GOBIN="+filepath.Dir(t.path()))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("installing %s %s: %w", t.Name, t.Version, err)
	}
	return nil
}

// TemporalServerTools installs what the production Temporal server needs:
// temporal-server, temporal-sql-tool and the Web UI server.
func TemporalServerTools(ctx context.Context, logger *slog.Logger) error {
	for _, t := range []goTool{temporalServerTool, temporalSQLTool, temporalUITool} {
		if err := t.install(ctx, logger); err != nil {
			return err
		}
	}
	return nil
}

// TemporalServerInstalled reports whether temporal-server and temporal-sql-tool are
// in place.
func TemporalServerInstalled() bool {
	return temporalServerTool.installed() && temporalSQLTool.installed()
}

// TemporalServerBinary is the path of the installed temporal-server.
func TemporalServerBinary() string { return temporalServerTool.path() }

// temporalServerPorts are the production server's listeners beside the stack's
// Temporal ports: one gRPC and one membership port per service, all below 32768
// because the server stores membership ports as smallint.
type temporalServerPorts struct {
	History, Matching, Worker                                 int
	FrontendMembership, HistoryMembership, MatchingMembership int
	WorkerMembership                                          int
	// InternalFrontend serves the server's own worker service when authorization
	// is on (it maps no claims, so the system workflows are not refused).
	InternalFrontend, InternalFrontendMembership int
}

// pickTemporalServerPorts chooses the internal ports once per stack, so that a
// restarted server comes back on the same ones.
func (s *Stack) pickTemporalServerPorts() (temporalServerPorts, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.temporalServerPorts != nil {
		return *s.temporalServerPorts, nil
	}
	var p temporalServerPorts
	for _, v := range []*int{&p.History, &p.Matching, &p.Worker,
		&p.FrontendMembership, &p.HistoryMembership, &p.MatchingMembership, &p.WorkerMembership,
		&p.InternalFrontend, &p.InternalFrontendMembership} {
		port, err := FreePort(true)
		if err != nil {
			return p, err
		}
		*v = port
	}
	s.temporalServerPorts = &p
	return p, nil
}

// startTemporalServer runs temporal-server against the stack's PostgreSQL (already
// running), setting up its databases on first use, then the Web UI server, and
// makes sure the default namespace exists.
func (s *Stack) startTemporalServer(ctx context.Context, dir string, ports temporalPorts) error {
	for _, t := range []goTool{temporalServerTool, temporalSQLTool} {
		if !t.installed() {
			return fmt.Errorf("%s %s is not installed at %s (run `mantisctl dev install --temporal-server`)", t.Name, t.Version, t.path())
		}
	}
	password, err := s.secret("postgres-temporal-password")
	if err != nil {
		return err
	}
	if err := s.prepareTemporalDatabases(ctx, password); err != nil {
		return err
	}
	internal, err := s.pickTemporalServerPorts()
	if err != nil {
		return err
	}
	auth, err := s.temporalServerAuth()
	if err != nil {
		return err
	}
	configDir := filepath.Join(dir, "config")
	if err := s.writeTemporalServerConfig(configDir, ports, internal, password, auth.jwksURL); err != nil {
		return err
	}
	p, err := startProcess(s.logger, processSpec{
		Name: "temporal", Path: temporalServerTool.path(), Dir: dir,
		Args:    append([]string{"--root", dir, "--config", "config", "--env", "mantis"}, auth.startArgs...),
		LogPath: filepath.Join(s.opts.Dir, "logs", "temporal.log"),
	})
	if err != nil {
		return err
	}
	s.track(p)
	launched := time.Now()
	addr := fmt.Sprintf("127.0.0.1:%d", ports.Frontend)
	if err := waitFor(ctx, p, 120*time.Second, func(ctx context.Context) error {
		return ensureNamespace(ctx, addr, "default", auth.token)
	}); err != nil {
		return fmt.Errorf("temporal-server did not become ready (see %s): %w", s.LogPath("temporal"), err)
	}
	s.logger.Info("temporal-server serving its namespace", "namespace", "default",
		"since_launch", time.Since(launched).Round(time.Millisecond))
	s.Env["TEMPORAL_ADDRESS"] = addr
	s.Env["TEMPORAL_NAMESPACE"] = "default"
	s.Env["MANTIS_TEMPORAL_KIND"] = "server"
	s.Env["MANTIS_TEMPORAL_POSTGRES_DATABASES"] = temporalDatabase + "," + temporalVisibilityDatabase
	switch {
	case s.opts.TemporalAuthorization:
		s.logger.Info("no Temporal Web UI server: the server refuses calls without a token")
	case s.running("temporal-ui") != nil:
		// A restarted server keeps the UI that already runs in front of it.
	case temporalUITool.installed():
		if err := s.startTemporalUI(ctx, filepath.Join(dir, "ui"), ports); err != nil {
			return err
		}
	default:
		s.logger.Warn("the Temporal Web UI server is not installed: no UI for the production server",
			"install", "mantisctl dev install --temporal-server")
	}
	return nil
}

// temporalServerLaunch is how temporal-server starts: with authorization, its JWKS
// address, the services to run (the internal frontend too) and the stack's own token.
type temporalServerLaunch struct {
	jwksURL   string
	startArgs []string
	token     string
}

// temporalServerAuth returns the launch settings for the stack's authorization option.
func (s *Stack) temporalServerAuth() (temporalServerLaunch, error) {
	if !s.opts.TemporalAuthorization {
		return temporalServerLaunch{startArgs: []string{"--allow-no-auth", "start"}}, nil
	}
	iss, err := s.temporalIssuer()
	if err != nil {
		return temporalServerLaunch{}, err
	}
	token, err := iss.token("mantis-dev-stack", time.Hour, []string{TemporalAdminPermission})
	if err != nil {
		return temporalServerLaunch{}, err
	}
	args := []string{"start"}
	for _, svc := range []string{"frontend", "internal-frontend", "history", "matching", "worker"} {
		args = append(args, "--service", svc)
	}
	return temporalServerLaunch{jwksURL: iss.URL, startArgs: args, token: token}, nil
}

func (s *Stack) writeTemporalServerConfig(configDir string, ports temporalPorts, internal temporalServerPorts, password, jwksURL string) error {
	if err := os.MkdirAll(configDir, 0o700); err != nil {
		return err
	}
	dynamic := filepath.Join(configDir, "dynamic.yaml")
	if err := os.WriteFile(dynamic, temporalDynamicConfig, 0o600); err != nil {
		return err
	}
	values := map[string]any{
		"Database": temporalDatabase, "VisibilityDatabase": temporalVisibilityDatabase,
		"PostgresPort": s.Ports.Postgres, "User": temporalRole, "Password": password,
		"MetricsPort": ports.Metrics, "FrontendPort": ports.Frontend, "HTTPPort": ports.HTTP,
		"HistoryPort": internal.History, "MatchingPort": internal.Matching, "WorkerPort": internal.Worker,
		"FrontendMembershipPort": internal.FrontendMembership, "HistoryMembershipPort": internal.HistoryMembership,
		"MatchingMembershipPort": internal.MatchingMembership, "WorkerMembershipPort": internal.WorkerMembership,
		"DynamicConfig": dynamic, "JWKSURL": jwksURL,
		"InternalFrontendPort": internal.InternalFrontend, "InternalFrontendMembershipPort": internal.InternalFrontendMembership,
	}
	return renderFile(filepath.Join(configDir, "mantis.yaml"), temporalServerConfig, values)
}

// renderFile writes a text template's output to path, readable by its owner only
// (the server's configuration holds its database password).
func renderFile(path, text string, values any) error {
	tmpl, err := template.New(filepath.Base(path)).Option("missingkey=error").Parse(text)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if err := tmpl.Execute(f, values); err != nil {
		f.Close()
		return fmt.Errorf("rendering %s: %w", path, err)
	}
	return f.Close()
}

// startTemporalUI runs the Web UI server for the production server, with the
// stack's codec endpoint when one is set.
func (s *Stack) startTemporalUI(ctx context.Context, dir string, ports temporalPorts) error {
	configDir := filepath.Join(dir, "config")
	if err := os.MkdirAll(configDir, 0o700); err != nil {
		return err
	}
	if err := renderFile(filepath.Join(configDir, "mantis.yaml"), temporalUIConfig, map[string]any{
		"FrontendPort": ports.Frontend, "UIPort": ports.UI, "CodecEndpoint": s.opts.UICodecEndpoint,
	}); err != nil {
		return err
	}
	p, err := startProcess(s.logger, processSpec{
		Name: "temporal-ui", Path: temporalUITool.path(), Dir: dir,
		Args:    []string{"--root", dir, "--config", "config", "--env", "mantis", "start"},
		LogPath: filepath.Join(s.opts.Dir, "logs", "temporal-ui.log"),
	})
	if err != nil {
		return err
	}
	s.track(p)
	url := fmt.Sprintf("http://127.0.0.1:%d", ports.UI)
	if err := s.WaitHTTP(ctx, "temporal-ui", url+"/", 60*time.Second); err != nil {
		return fmt.Errorf("the Temporal Web UI server did not become ready (see %s): %w", s.LogPath("temporal-ui"), err)
	}
	s.Env["TEMPORAL_UI_URL"] = url
	return nil
}

// ensureNamespace registers namespace on the server at addr when it does not exist,
// and succeeds once the server describes it. A token, when given, is sent as a
// bearer credential (over plain loopback gRPC).
func ensureNamespace(ctx context.Context, addr, namespace, token string) error {
	opts := client.Options{HostPort: addr, Namespace: namespace,
		Logger: tlog.NewStructuredLogger(slog.New(slog.DiscardHandler))}
	if token != "" {
		opts.Credentials = client.NewAPIKeyStaticCredentials(token)
		opts.ConnectionOptions.TLSDisabled = true
	}
	c, err := client.Dial(opts)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
	var notFound *serviceerror.NamespaceNotFound
	if !errors.As(err, &notFound) {
		return err
	}
	_, err = c.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace:                        namespace,
		Description:                      "Mantis dev stack",
		WorkflowExecutionRetentionPeriod: durationpb.New(temporalNamespaceRetention),
	})
	var exists *serviceerror.NamespaceAlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("registering namespace %s: %w", namespace, err)
	}
	return errors.New("namespace registered; waiting for the server to serve it")
}

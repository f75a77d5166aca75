package workers

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/testrig/devstack"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/workflows"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// freshNamespace is a namespace name nobody has used.
func freshNamespace() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "mantis-test-" + hex.EncodeToString(b[:])
}

func setupFor(t *testing.T, srv testenv.Temporal, namespace, mode string) NamespaceSetup {
	t.Helper()
	c, err := client.Dial(client.Options{HostPort: srv.Address, Namespace: namespace})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return NamespaceSetup{
		Client: c, Namespace: namespace, Keys: workflows.SearchAttributes(), Mode: mode,
		Wait: 60 * time.Second, Logger: slog.New(slog.NewTextHandler(t.Output(), nil)),
	}
}

// runPrintedCommands runs each indented `temporal …` command line of msg with the
// CLI, against srv.
func runPrintedCommands(t *testing.T, srv testenv.Temporal, msg string) int {
	t.Helper()
	cli, err := devstack.TemporalCLI()
	require.NoError(t, err)
	ran := 0
	sc := bufio.NewScanner(strings.NewReader(msg))
	for sc.Scan() {
		if !strings.HasPrefix(sc.Text(), "  temporal ") {
			continue
		}
		line := strings.TrimSpace(sc.Text())
		cmd := exec.Command(cli, strings.Fields(line)[1:]...)
		cmd.Env = append(os.Environ(), "TEMPORAL_ADDRESS="+srv.Address)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s: %s", line, out)
		ran++
	}
	return ran
}

//mantis:temporal-server
func TestPrepareNamespaceNamesTheCommandThatCreatesAMissingNamespace(t *testing.T) {
	srv := testenv.TemporalServer(t)
	srv.RequireWantedKind(t)
	ns := freshNamespace()
	ctx := context.Background()

	err := PrepareNamespace(ctx, setupFor(t, srv, ns, config.SearchAttributesRegister))
	require.Error(t, err)
	require.Contains(t, err.Error(), "temporal operator namespace create --namespace "+ns)
	require.Equal(t, 1, runPrintedCommands(t, srv, err.Error()))

	// The next start registers the attributes and waits until the namespace maps them.
	require.NoError(t, PrepareNamespace(ctx, setupFor(t, srv, ns, config.SearchAttributesRegister)))
}

//mantis:temporal-server
func TestPrepareNamespaceInCheckModeNamesTheCommandsThatAddMissingAttributes(t *testing.T) {
	srv := testenv.TemporalServer(t)
	srv.RequireWantedKind(t)
	ns := freshNamespace()
	ctx := context.Background()
	create := exec.Command(mustCLI(t), "operator", "namespace", "create", "--namespace", ns)
	create.Env = append(os.Environ(), "TEMPORAL_ADDRESS="+srv.Address)
	out, err := create.CombinedOutput()
	require.NoError(t, err, "%s", out)

	err = PrepareNamespace(ctx, setupFor(t, srv, ns, config.SearchAttributesCheck))
	require.Error(t, err)
	for _, k := range workflows.SearchAttributes() {
		require.Contains(t, err.Error(), "--name "+k.GetName()+" --type Keyword")
		require.Contains(t, err.Error(), "tcld namespace search-attributes add --namespace "+ns+".<account>")
	}
	require.Equal(t, len(workflows.SearchAttributes()), runPrintedCommands(t, srv, err.Error()))

	require.NoError(t, PrepareNamespace(ctx, setupFor(t, srv, ns, config.SearchAttributesCheck)))
}

//mantis:temporal-server
func TestPrepareNamespaceRefusesAnAttributeOfAnotherType(t *testing.T) {
	srv := testenv.TemporalServer(t)
	srv.RequireWantedKind(t)
	ctx := context.Background()
	s := setupFor(t, srv, srv.Namespace, config.SearchAttributesRegister)
	// The namespace has MantisReplica as a Keyword; a key of the same name as Int
	// cannot be used.
	s.Keys = []temporal.SearchAttributeKey{temporal.NewSearchAttributeKeyInt64(workflows.ReplicaSearchAttribute.GetName())}
	require.NoError(t, PrepareNamespace(ctx, setupFor(t, srv, srv.Namespace, config.SearchAttributesRegister)))
	err := PrepareNamespace(ctx, s)
	require.ErrorContains(t, err, "search attribute MantisReplica of namespace \""+srv.Namespace+"\" is of type Keyword; Mantis needs Int")
}

func mustCLI(t *testing.T) string {
	t.Helper()
	cli, err := devstack.TemporalCLI()
	require.NoError(t, err)
	return cli
}

// sqlVisibilityLimits is how many custom search attributes of each type SQL
// visibility holds per namespace in temporal-server v1.29.1 (the pre-made columns
// Keyword01–10, Text01–03, … of its postgresql/v12 visibility schema).
var sqlVisibilityLimits = map[string]int{
	"Keyword": 10, "Text": 3, "Int": 3, "Double": 3, "Bool": 3, "Datetime": 3, "KeywordList": 3,
}

//mantis:temporal-server
func TestSearchAttributesFitSQLVisibility(t *testing.T) {
	perType := map[string]int{}
	for _, k := range workflows.SearchAttributes() {
		perType[typeName(k.GetValueType())]++
	}
	for typ, n := range perType {
		limit, ok := sqlVisibilityLimits[typ]
		require.True(t, ok, "SQL visibility has no custom search attributes of type %s", typ)
		// Leave room for the operator's own attributes of the same type.
		require.LessOrEqual(t, n, limit/2, "Mantis uses %d %s search attributes; SQL visibility holds %d per namespace", n, typ, limit)
	}
}

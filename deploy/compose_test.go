package deploy_test

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/mantis-deploy/mantis/internal/testrig/devstack"
)

// composeService is the part of a Compose service the rules look at.
type composeService struct {
	Image       string   `json:"image"`
	Ports       []string `json:"ports"`
	Healthcheck *struct {
		Test []string `json:"test"`
	} `json:"healthcheck"`
	Environment map[string]string `json:"environment"`
	Secrets     []string          `json:"secrets"`
}

// The RabbitMQ version the Compose installation must run at least. Its Temporal
// server and Web UI are the releases the dev stack's --temporal-server runs
// (devstack.TemporalServerVersion, devstack.TemporalUIVersion), so that the tests of
// make test-temporal-server speak for the Compose installation.
const minRabbitMQMajor, minRabbitMQMinor = 4, 3

func loadCompose(t *testing.T) map[string]composeService {
	t.Helper()
	b, err := os.ReadFile("compose/compose.yaml")
	require.NoError(t, err)
	var doc struct {
		Services map[string]composeService `json:"services"`
	}
	require.NoError(t, yaml.Unmarshal(b, &doc))
	require.NotEmpty(t, doc.Services)
	return doc.Services
}

// imageVersion splits "repo:tag" into the repository and the tag's leading
// dotted numbers ("4.3.0-management" -> [4 3 0]).
func imageVersion(ref string) (repo string, version []int) {
	repo, tag, _ := strings.Cut(ref, ":")
	num, _, _ := strings.Cut(tag, "-")
	for _, part := range strings.Split(num, ".") {
		n, err := strconv.Atoi(part)
		if err != nil {
			break
		}
		version = append(version, n)
	}
	return repo, version
}

func TestComposeImagesArePinnedAndHealthChecked(t *testing.T) {
	t.Parallel()
	for name, svc := range loadCompose(t) {
		image := os.Expand(svc.Image, func(v string) string {
			// ${VAR:-default}: the default is what a plain `up` runs.
			_, def, _ := strings.Cut(v, ":-")
			return def
		})
		require.True(t, imagePinned(image), "service %s: image %q is not pinned", name, svc.Image)
		require.NotNil(t, svc.Healthcheck, "service %s has no healthcheck", name)
		require.NotEmpty(t, svc.Healthcheck.Test, "service %s has an empty healthcheck", name)
	}
}

func TestComposeRunsTwoOfEachMantisProcess(t *testing.T) {
	t.Parallel()
	count := map[string]int{}
	for name := range loadCompose(t) {
		prefix, _, _ := strings.Cut(name, "-")
		count[prefix]++
	}
	for _, part := range []string{"mandible", "thorax", "agent"} {
		require.Equal(t, 2, count[part], "services named %s-N", part)
	}
}

func TestComposeBrokerIsRabbitMQ43WithTLSPortsOnly(t *testing.T) {
	t.Parallel()
	broker, ok := loadCompose(t)["rabbitmq"]
	require.True(t, ok)
	repo, v := imageVersion(broker.Image)
	require.Equal(t, "rabbitmq", repo)
	require.Len(t, v, 3, "an exact version: %s", broker.Image)
	require.True(t, v[0] > minRabbitMQMajor || (v[0] == minRabbitMQMajor && v[1] >= minRabbitMQMinor),
		"RabbitMQ %s is older than %d.%d", broker.Image, minRabbitMQMajor, minRabbitMQMinor)
	var published []string
	for _, p := range broker.Ports {
		parts := strings.Split(p, ":")
		published = append(published, parts[len(parts)-1])
	}
	require.ElementsMatch(t, []string{"5671", "15671"}, published, "AMQPS and HTTPS management only")

	conf, err := os.ReadFile("compose/rabbitmq/rabbitmq.conf")
	require.NoError(t, err)
	settings := map[string]string{}
	for _, line := range strings.Split(string(conf), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(strings.TrimSpace(line), "#") {
			settings[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	require.Equal(t, "none", settings["listeners.tcp"])
	require.Equal(t, "5671", settings["listeners.ssl.default"])
	require.Equal(t, "15671", settings["management.ssl.port"])
	require.Equal(t, "true", settings["ssl_options.fail_if_no_peer_cert"])
	for k := range settings {
		require.False(t, strings.HasPrefix(k, "management.tcp"), "management over plain HTTP: %s", k)
	}
}

func TestComposeTemporalUsesPostgreSQLAndMandiblesCodec(t *testing.T) {
	t.Parallel()
	services := loadCompose(t)
	temporal := services["temporal"]
	repo, _ := imageVersion(temporal.Image)
	require.Contains(t, []string{"temporalio/server", "temporalio/auto-setup"}, repo)
	require.Equal(t, repo+":"+strings.TrimPrefix(devstack.TemporalServerVersion, "v"), temporal.Image,
		"the server release the dev stack's --temporal-server runs")
	require.Equal(t, "postgres12", temporal.Environment["DB"])
	ui := services["temporal-ui"]
	require.Equal(t, "temporalio/ui:"+strings.TrimPrefix(devstack.TemporalUIVersion, "v"), ui.Image,
		"the Web UI release the dev stack's --temporal-server runs")
	require.True(t, strings.HasSuffix(ui.Environment["TEMPORAL_CODEC_ENDPOINT"], "/codec"))
	require.Contains(t, services["mandible-1"].Secrets, "mandible_config", "passwords reach Mandible as a secret file")
}

// TestComposeAgentsRunTheAgentImage checks that the agents run the agent image,
// which has a shell (the agent runs every command as /bin/sh -c), and that Mandible
// and Thorax keep the distroless one: the repository's last element is the title
// label of the Dockerfile stage that builds it.
func TestComposeAgentsRunTheAgentImage(t *testing.T) {
	t.Parallel()
	checked := 0
	for name, svc := range loadCompose(t) {
		repo, _ := imageVersion(os.Expand(svc.Image, func(v string) string {
			_, def, _ := strings.Cut(v, ":-")
			return def
		}))
		want := ""
		switch {
		case strings.HasPrefix(name, "agent-"):
			want = "ghcr.io/mantis-deploy/mantis-agent"
			require.Contains(t, svc.Image, "${MANTIS_AGENT_IMAGE:-", "service %s", name)
		case strings.HasPrefix(name, "mandible-"), strings.HasPrefix(name, "thorax-"):
			want = "ghcr.io/mantis-deploy/mantis"
			require.Contains(t, svc.Image, "${MANTIS_IMAGE:-", "service %s", name)
		default:
			continue
		}
		require.Equal(t, want, repo, "service %s", name)
		checked++
	}
	require.Equal(t, 6, checked)
	_, stages := parseDockerfile(t, "Dockerfile")
	require.Equal(t, "mantis", stageTitle(stages[len(stages)-1]), "the default stage builds the mantis image")
	require.Equal(t, "mantis-agent", stageTitle(agentStage(t)), "the agent stage builds the mantis-agent image")
}

// stageTitle is the org.opencontainers.image.title label of a Dockerfile stage.
func stageTitle(st dockerStage) string {
	for _, in := range st.Body {
		if in.Cmd != "LABEL" {
			continue
		}
		if _, rest, ok := strings.Cut(in.Args, `org.opencontainers.image.title="`); ok {
			title, _, _ := strings.Cut(rest, `"`)
			return title
		}
	}
	return ""
}

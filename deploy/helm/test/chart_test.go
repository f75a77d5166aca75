package helmtest

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

// valueSet is one way to install the chart and what must follow from it beyond
// the rules every rendering obeys.
type valueSet struct {
	name   string
	values string
	check  func(t *testing.T, m *manifests)
}

var valueSets = []valueSet{
	{name: "defaults", values: ``, check: checkDefaults},
	{
		// Certificates from cert-manager, in-cluster agents, fixed Mandible
		// replicas, ServiceMonitors, and the chart writing its Secret.
		name: "cert-manager-agents-monitoring",
		values: `
certManager:
  enabled: true
  issuerRef: {name: mantis-ca, kind: ClusterIssuer}
agents:
  enabled: true
  targets:
    - name: web-1
      labels: {env: prod, zone: a}
    - name: web-2
      journalClaim: web-2-journal
mandible:
  autoscaling: {enabled: false}
serviceMonitor:
  enabled: true
  labels: {release: prometheus}
secrets:
  create: true
  values:
    database-url: postgres://mantis:pw@postgres:5432/mantis
    rabbitmq-mandible-password: pw1
    rabbitmq-thorax-password: pw2
    api-tokens: ""
    codec-keys: ""
temporal:
  address: temporal.example.com:7233
  namespace: mantis.abcde
  tls: {enabled: true, serverName: temporal.example.com}
  apiKey: {enabled: true}
  searchAttributes: check
thorax:
  drainTimeoutSeconds: 60
`,
		check: checkCertManagerAgentsMonitoring,
	},
	{
		// Secrets an external operator writes, no NetworkPolicies, three Mandible
		// replicas, a broker CA and a Temporal client pair of their own.
		name: "external-secrets-no-networkpolicy",
		values: `
networkPolicy: {enabled: false}
mandible:
  replicas: 3
  autoscaling: {enabled: false}
  analysis: {modelURL: "https://model.example.com/v1", model: explain-1}
  secretFiles: {secretName: deploy-secrets}
secrets:
  databaseURL: {secret: mantis-db, key: url}
  rabbitmqMandiblePassword: {secret: mantis-broker, key: mandible}
  rabbitmqThoraxPassword: {secret: mantis-broker, key: thorax}
  apiTokens: {secret: mantis-api, key: tokens.toml}
  codecKeys: {secret: mantis-codec, key: keys}
  analysisModelKey: {secret: mantis-model, key: key}
tls:
  mandible: {secretName: mandible-pki}
  thorax: {secretName: thorax-pki}
rabbitmq:
  host: broker.internal
  caSecret: {name: broker-ca, key: ca.pem}
temporal:
  tls: {enabled: true, caSecret: {name: temporal-ca, key: ca.crt}, clientSecret: temporal-client}
`,
		check: checkExternalSecrets,
	},
}

// TestChartRenders renders every value set, decodes it strictly and checks
// the rules every installation obeys, then what the value set itself asks for.
func TestChartRenders(t *testing.T) {
	t.Parallel()
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			t.Parallel()
			m := render(t, vs.values)
			checkContainers(t, m)
			checkImages(t, m)
			checkThoraxDrain(t, m)
			checkConfigs(t, m)
			checkServices(t, m)
			checkCertificates(t, m)
			vs.check(t, m)
		})
	}
}

func checkDefaults(t *testing.T, m *manifests) {
	require.ElementsMatch(t, []string{"mantis-mandible", "mantis-thorax"}, keys(m.Deployments))
	mandible := m.Deployments["mantis-mandible"]
	require.Nil(t, mandible.Spec.Replicas, "the HPA owns Mandible's replicas")
	hpa := m.HPAs["mantis-mandible"]
	require.NotNil(t, hpa, "Mandible's HPA")
	require.Equal(t, "mantis-mandible", hpa.Spec.ScaleTargetRef.Name)
	require.Equal(t, corev1.ResourceCPU, hpa.Spec.Metrics[0].Resource.Name)
	pdb := m.PDBs["mantis-mandible"]
	require.NotNil(t, pdb, "Mandible's PodDisruptionBudget")
	require.Equal(t, mandible.Spec.Selector.MatchLabels, pdb.Spec.Selector.MatchLabels)
	require.Empty(t, m.Certificates, "existing Secrets by default")
	require.Empty(t, m.ServiceMonitors)
	require.Empty(t, m.Secrets, "the chart writes no Secret unless asked")
	checkNetworkPolicies(t, m)
	// Every secret value comes from the one default Secret.
	require.Equal(t, map[string]string{
		"database-url":   "mantis/database-url",
		"queue-password": "mantis/rabbitmq-mandible-password",
	}, secretFiles(mandible.Spec.Template.Spec))
	require.Equal(t, map[string]string{"queue-password": "mantis/rabbitmq-thorax-password"},
		secretFiles(m.Deployments["mantis-thorax"].Spec.Template.Spec))
	require.Equal(t, "mantis-mandible-tls", secretVolume(t, mandible, "tls"))
	require.Equal(t, "mantis-thorax-tls", secretVolume(t, m.Deployments["mantis-thorax"], "tls"))
	require.Contains(t, m.Notes, "deploy/systemd/mantis-agent.service", "NOTES says host agents are not in the cluster")
}

func checkCertManagerAgentsMonitoring(t *testing.T, m *manifests) {
	require.ElementsMatch(t, []string{"mantis-mandible", "mantis-thorax", "mantis-agent-web-1", "mantis-agent-web-2"}, keys(m.Deployments))
	require.Empty(t, m.HPAs)
	require.Equal(t, int32(2), *m.Deployments["mantis-mandible"].Spec.Replicas)
	require.ElementsMatch(t, []string{"mantis-mandible", "mantis-thorax", "mantis-agent-web-1", "mantis-agent-web-2"}, keys(m.Certificates))
	for _, c := range m.Certificates {
		require.Equal(t, "ClusterIssuer", c.Spec.IssuerRef.Kind)
	}
	require.ElementsMatch(t, []string{"mantis-mandible", "mantis-thorax", "mantis-agent"}, keys(m.ServiceMonitors))
	for _, sm := range m.ServiceMonitors {
		require.Equal(t, "prometheus", sm.Labels["release"])
	}
	mandibleSM := m.ServiceMonitors["mantis-mandible"]
	require.Equal(t, "https", string(*mandibleSM.Spec.Endpoints[0].Scheme))
	require.Equal(t, "mantis-mandible-tls", mandibleSM.Spec.Endpoints[0].TLSConfig.CA.Secret.Name)
	require.Contains(t, m.Secrets, "mantis", "secrets.create writes the Secret")

	web1 := m.Deployments["mantis-agent-web-1"].Spec.Template.Spec
	require.Equal(t, "env=prod,zone=a", envValue(web1.Containers[0], "MANTIS_LABELS"))
	require.Equal(t, "web-1", envValue(web1.Containers[0], "MANTIS_NAME"))
	require.NotNil(t, volume(web1, "journal").EmptyDir)
	web2 := m.Deployments["mantis-agent-web-2"].Spec.Template.Spec
	require.Equal(t, "web-2-journal", volume(web2, "journal").PersistentVolumeClaim.ClaimName)
	// stop_timeout 15 s + kill_grace 5 s + 5 s + margin 5 s.
	require.Equal(t, int64(30), *web1.TerminationGracePeriodSeconds)

	mandible := m.Deployments["mantis-mandible"].Spec.Template.Spec
	require.Equal(t, "mantis/temporal-api-key", secretFiles(mandible)["temporal-api-key"])
	// A drain of 60 s: preStop 5 s + 60 s + margin 10 s.
	require.Equal(t, int64(75), *m.Deployments["mantis-thorax"].Spec.Template.Spec.TerminationGracePeriodSeconds)
	require.Contains(t, m.NetworkPolicies, "mantis-agent")
}

func checkExternalSecrets(t *testing.T, m *manifests) {
	require.Empty(t, m.NetworkPolicies)
	require.Empty(t, m.HPAs)
	mandible := m.Deployments["mantis-mandible"]
	require.Equal(t, int32(3), *mandible.Spec.Replicas)
	require.Equal(t, map[string]string{
		"database-url":       "mantis-db/url",
		"queue-password":     "mantis-broker/mandible",
		"analysis-model-key": "mantis-model/key",
	}, secretFiles(mandible.Spec.Template.Spec))
	thorax := m.Deployments["mantis-thorax"]
	require.Equal(t, map[string]string{"queue-password": "mantis-broker/thorax"}, secretFiles(thorax.Spec.Template.Spec))
	require.Equal(t, "mantis-api", secretVolume(t, mandible, "tokens"))
	require.Equal(t, "mantis-codec", secretVolume(t, mandible, "codec"))
	require.Equal(t, "mandible-pki", secretVolume(t, mandible, "tls"))
	require.Equal(t, "thorax-pki", secretVolume(t, thorax, "tls"))
	require.Equal(t, "broker-ca", secretVolume(t, thorax, "rabbitmq-ca"))
	require.Empty(t, m.Secrets)
}

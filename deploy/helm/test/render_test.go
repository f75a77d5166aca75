package helmtest

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

// The chart and the release every value set is rendered as.
const (
	chartDir         = "../mantis"
	releaseName      = "mantis"
	releaseNamespace = "mantis"
	// fullname is the chart's "<release>-<chart>" name shortened to the release
	// name, since the release name contains the chart's.
	fullname = "mantis"
)

// manifests is a rendered chart: every object, decoded into its type.
type manifests struct {
	Deployments     map[string]*appsv1.Deployment
	Services        map[string]*corev1.Service
	ConfigMaps      map[string]*corev1.ConfigMap
	Secrets         map[string]*corev1.Secret
	ServiceAccounts map[string]*corev1.ServiceAccount
	HPAs            map[string]*autoscalingv2.HorizontalPodAutoscaler
	PDBs            map[string]*policyv1.PodDisruptionBudget
	NetworkPolicies map[string]*networkingv1.NetworkPolicy
	ServiceMonitors map[string]*monitoringv1.ServiceMonitor
	Certificates    map[string]*certificate
	// Notes is the rendered NOTES.txt.
	Notes string
}

// certificate is the part of cert-manager's Certificate (cert-manager.io/v1)
// the chart writes. Decoding is strict, so a field outside it fails the test.
type certificate struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		SecretName  string   `json:"secretName"`
		CommonName  string   `json:"commonName"`
		DNSNames    []string `json:"dnsNames"`
		URIs        []string `json:"uris"`
		Usages      []string `json:"usages"`
		Duration    string   `json:"duration"`
		RenewBefore string   `json:"renewBefore"`
		PrivateKey  struct {
			Algorithm      string `json:"algorithm"`
			Size           int    `json:"size"`
			RotationPolicy string `json:"rotationPolicy"`
		} `json:"privateKey"`
		IssuerRef struct {
			Name  string `json:"name"`
			Kind  string `json:"kind"`
			Group string `json:"group"`
		} `json:"issuerRef"`
	} `json:"spec"`
}

// certificateUsages are the key usages cert-manager accepts that a TLS pair may carry.
var certificateUsages = []string{"digital signature", "key encipherment", "server auth", "client auth"}

// validate checks the fields cert-manager requires.
func (c *certificate) validate() error {
	var problems []string
	if c.Spec.SecretName == "" {
		problems = append(problems, "spec.secretName is required")
	}
	if c.Spec.IssuerRef.Name == "" {
		problems = append(problems, "spec.issuerRef.name is required")
	}
	if len(c.Spec.DNSNames) == 0 && len(c.Spec.URIs) == 0 && c.Spec.CommonName == "" {
		problems = append(problems, "one of spec.dnsNames, spec.uris or spec.commonName is required")
	}
	for _, u := range c.Spec.Usages {
		if !slices.Contains(certificateUsages, u) {
			problems = append(problems, fmt.Sprintf("spec.usages: unknown usage %q", u))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("certificate %s: %s", c.Metadata.Name, strings.Join(problems, "; "))
	}
	return nil
}

// render renders the chart with the values in overrides (YAML) over its own, as
// helm install would, and decodes the result.
func render(t *testing.T, overrides string) *manifests {
	t.Helper()
	ch, err := loader.Load(chartDir)
	require.NoError(t, err, "loading the chart")
	vals, err := chartutil.ReadValues([]byte(overrides))
	require.NoError(t, err, "reading the override values")
	release := chartutil.ReleaseOptions{Name: releaseName, Namespace: releaseNamespace, Revision: 1, IsInstall: true}
	top, err := chartutil.ToRenderValues(ch, vals, release, chartutil.DefaultCapabilities)
	require.NoError(t, err, "preparing the render values")
	// Strict: a template that reads a value the values do not have fails.
	out, err := engine.Engine{Strict: true, LintMode: false}.Render(ch, top)
	require.NoError(t, err, "rendering the chart")
	return decodeAll(t, out)
}

// documentSeparator splits a YAML stream into documents.
var documentSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// decodeAll decodes every document of every rendered template, strictly.
func decodeAll(t *testing.T, out map[string]string) *manifests {
	t.Helper()
	m := &manifests{
		Deployments: map[string]*appsv1.Deployment{}, Services: map[string]*corev1.Service{},
		ConfigMaps: map[string]*corev1.ConfigMap{}, Secrets: map[string]*corev1.Secret{},
		ServiceAccounts: map[string]*corev1.ServiceAccount{},
		HPAs:            map[string]*autoscalingv2.HorizontalPodAutoscaler{},
		PDBs:            map[string]*policyv1.PodDisruptionBudget{},
		NetworkPolicies: map[string]*networkingv1.NetworkPolicy{},
		ServiceMonitors: map[string]*monitoringv1.ServiceMonitor{},
		Certificates:    map[string]*certificate{},
	}
	for _, name := range slices.Sorted(maps.Keys(out)) {
		if strings.HasSuffix(name, "NOTES.txt") {
			m.Notes = out[name]
			continue
		}
		for i, doc := range documentSeparator.Split(out[name], -1) {
			if emptyDocument(doc) {
				continue
			}
			require.NoError(t, m.decode([]byte(doc)), "%s, document %d:\n%s", name, i, doc)
		}
	}
	return m
}

// emptyDocument reports whether a document holds only blank lines and comments.
func emptyDocument(doc string) bool {
	for line := range strings.SplitSeq(doc, "\n") {
		if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
			return false
		}
	}
	return true
}

// decode decodes one document into the type its apiVersion and kind name; any
// other kind, an unknown field or a duplicate key is an error.
func (m *manifests) decode(doc []byte) error {
	var meta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal(doc, &meta); err != nil {
		return fmt.Errorf("reading the document's kind: %w", err)
	}
	name := meta.Metadata.Name
	switch gvk := meta.APIVersion + " " + meta.Kind; gvk {
	case "apps/v1 Deployment":
		return into(doc, name, m.Deployments)
	case "v1 Service":
		return into(doc, name, m.Services)
	case "v1 ConfigMap":
		return into(doc, name, m.ConfigMaps)
	case "v1 Secret":
		return into(doc, name, m.Secrets)
	case "v1 ServiceAccount":
		return into(doc, name, m.ServiceAccounts)
	case "autoscaling/v2 HorizontalPodAutoscaler":
		return into(doc, name, m.HPAs)
	case "policy/v1 PodDisruptionBudget":
		return into(doc, name, m.PDBs)
	case "networking.k8s.io/v1 NetworkPolicy":
		return into(doc, name, m.NetworkPolicies)
	case "monitoring.coreos.com/v1 ServiceMonitor":
		return into(doc, name, m.ServiceMonitors)
	case "cert-manager.io/v1 Certificate":
		if err := into(doc, name, m.Certificates); err != nil {
			return err
		}
		return m.Certificates[name].validate()
	default:
		return fmt.Errorf("kind %q is not one the chart may render", gvk)
	}
}

// into decodes doc strictly into a new T and files it under name, refusing a
// missing or repeated name.
func into[T any](doc []byte, name string, objects map[string]*T) error {
	if name == "" {
		return fmt.Errorf("object without metadata.name")
	}
	if _, dup := objects[name]; dup {
		return fmt.Errorf("two objects of the same kind named %s", name)
	}
	obj := new(T)
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return fmt.Errorf("decoding %s strictly: %w", name, err)
	}
	objects[name] = obj
	return nil
}

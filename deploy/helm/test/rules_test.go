package helmtest

import (
	"maps"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// componentLabel names the part of Mantis a pod runs.
const componentLabel = "app.kubernetes.io/component"

func keys[T any](m map[string]T) []string { return slices.Sorted(maps.Keys(m)) }

// checkContainers holds every container to the pod rules: probes, requests and
// limits, non-root, read-only root, no capabilities, no privilege escalation.
func checkContainers(t *testing.T, m *manifests) {
	t.Helper()
	require.NotEmpty(t, m.Deployments)
	for name, d := range m.Deployments {
		pod := d.Spec.Template.Spec
		require.NotNil(t, pod.SecurityContext, "%s: pod securityContext", name)
		require.True(t, ptrTrue(pod.SecurityContext.RunAsNonRoot), "%s: runAsNonRoot", name)
		require.NotNil(t, pod.SecurityContext.RunAsUser, "%s: runAsUser", name)
		require.NotZero(t, *pod.SecurityContext.RunAsUser, "%s: runAsUser must not be root", name)
		require.False(t, ptrTrue(pod.AutomountServiceAccountToken), "%s: Mantis calls no Kubernetes API", name)
		require.Equal(t, d.Spec.Selector.MatchLabels, subset(d.Spec.Template.Labels, d.Spec.Selector.MatchLabels),
			"%s: the selector matches the pod template", name)
		require.Empty(t, pod.InitContainers, "%s: init containers", name)
		for _, c := range pod.Containers {
			where := name + "/" + c.Name
			require.NotNil(t, c.LivenessProbe, "%s: liveness probe", where)
			require.NotNil(t, c.ReadinessProbe, "%s: readiness probe", where)
			for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				require.Contains(t, c.Resources.Requests, r, "%s: request of %s", where, r)
				require.Contains(t, c.Resources.Limits, r, "%s: limit of %s", where, r)
			}
			sc := c.SecurityContext
			require.NotNil(t, sc, "%s: securityContext", where)
			require.True(t, ptrTrue(sc.RunAsNonRoot), "%s: runAsNonRoot", where)
			require.True(t, ptrTrue(sc.ReadOnlyRootFilesystem), "%s: readOnlyRootFilesystem", where)
			require.NotNil(t, sc.AllowPrivilegeEscalation, "%s: allowPrivilegeEscalation", where)
			require.False(t, *sc.AllowPrivilegeEscalation, "%s: allowPrivilegeEscalation", where)
			require.NotNil(t, sc.Capabilities, "%s: capabilities", where)
			require.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop, "%s: drop ALL", where)
			require.Empty(t, sc.Capabilities.Add, "%s: no capability added", where)
			for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe} {
				require.NotNil(t, p.HTTPGet, "%s: probes are HTTP GETs", where)
				require.NotNil(t, containerPort(c, p.HTTPGet.Port.String()), "%s: probe port %s is a container port", where, p.HTTPGet.Port.String())
			}
		}
	}
}

func ptrTrue(b *bool) bool { return b != nil && *b }

// subset returns the entries of all whose keys are in want.
func subset(all, want map[string]string) map[string]string {
	out := map[string]string{}
	for k := range want {
		if v, ok := all[k]; ok {
			out[k] = v
		}
	}
	return out
}

// containerPort returns the port named (or numbered) port, or nil.
func containerPort(c corev1.Container, port string) *corev1.ContainerPort {
	for i, p := range c.Ports {
		if p.Name == port || port == strconv.Itoa(int(p.ContainerPort)) {
			return &c.Ports[i]
		}
	}
	return nil
}

// checkServices checks that every Service, ServiceMonitor, HPA and PDB reaches
// what it means to: selectors that match pods, ports those pods have.
func checkServices(t *testing.T, m *manifests) {
	t.Helper()
	for name, svc := range m.Services {
		pods := matchingPods(m, svc.Spec.Selector)
		require.NotEmpty(t, pods, "service %s selects no pods", name)
		for _, p := range svc.Spec.Ports {
			for _, pod := range pods {
				require.NotNil(t, containerPort(pod.Containers[0], p.TargetPort.String()),
					"service %s: target port %s is not a port of its pods", name, p.TargetPort.String())
			}
		}
	}
	for name, sm := range m.ServiceMonitors {
		var found bool
		for _, svc := range m.Services {
			if labels.SelectorFromSet(sm.Spec.Selector.MatchLabels).Matches(labels.Set(svc.Labels)) {
				for _, p := range svc.Spec.Ports {
					found = found || p.Name == sm.Spec.Endpoints[0].Port
				}
			}
		}
		require.True(t, found, "service monitor %s selects no service with port %s", name, sm.Spec.Endpoints[0].Port)
	}
	for name, hpa := range m.HPAs {
		d := m.Deployments[hpa.Spec.ScaleTargetRef.Name]
		require.NotNil(t, d, "HPA %s scales a missing deployment", name)
		require.Nil(t, d.Spec.Replicas, "HPA %s: the deployment must leave replicas to it", name)
	}
	for name, pdb := range m.PDBs {
		require.NotEmpty(t, matchingPods(m, pdb.Spec.Selector.MatchLabels), "PDB %s selects no pods", name)
	}
}

// matchingPods returns the pod specs of the deployments whose pods selector matches.
func matchingPods(m *manifests, selector map[string]string) []corev1.PodSpec {
	var out []corev1.PodSpec
	for _, d := range m.Deployments {
		if labels.SelectorFromSet(selector).Matches(labels.Set(d.Spec.Template.Labels)) {
			out = append(out, d.Spec.Template.Spec)
		}
	}
	return out
}

// checkNetworkPolicies checks the default policies: Mandible's HTTP open, its
// gRPC only from Thorax pods, Thorax's agent port open, and egress to the
// database, broker, Temporal and DNS.
func checkNetworkPolicies(t *testing.T, m *manifests) {
	t.Helper()
	mandible, thorax := m.NetworkPolicies["mantis-mandible"], m.NetworkPolicies["mantis-thorax"]
	require.NotNil(t, mandible)
	require.NotNil(t, thorax)
	thoraxPods := m.Deployments["mantis-thorax"].Spec.Template.Labels
	http, grpc := ingressFor(mandible, "http"), ingressFor(mandible, "grpc")
	require.NotNil(t, http, "Mandible's HTTP admitted")
	require.Empty(t, http.From, "Mandible's HTTP from anywhere")
	require.NotNil(t, grpc, "Mandible's gRPC admitted")
	require.Len(t, grpc.From, 1, "Mandible's gRPC from Thorax only")
	require.NotNil(t, grpc.From[0].PodSelector)
	require.Nil(t, grpc.From[0].NamespaceSelector)
	require.Nil(t, grpc.From[0].IPBlock)
	require.True(t, labels.SelectorFromSet(grpc.From[0].PodSelector.MatchLabels).Matches(labels.Set(thoraxPods)))
	require.False(t, labels.SelectorFromSet(grpc.From[0].PodSelector.MatchLabels).Matches(
		labels.Set(m.Deployments["mantis-mandible"].Spec.Template.Labels)), "gRPC admits Thorax, not Mandible")
	agents := ingressFor(thorax, "agents")
	require.NotNil(t, agents, "Thorax's agent port admitted")
	require.Empty(t, agents.From)
	require.ElementsMatch(t, []int32{53, 53, 5432, 7233, 5671}, egressPorts(mandible))
	require.Contains(t, egressPorts(thorax), int32(9090), "Thorax reaches Mandible's gRPC")
	require.Contains(t, egressPorts(thorax), int32(5671), "Thorax reaches the broker")
}

func ingressFor(np *networkingv1.NetworkPolicy, port string) *networkingv1.NetworkPolicyIngressRule {
	for i, r := range np.Spec.Ingress {
		for _, p := range r.Ports {
			if p.Port != nil && p.Port.String() == port {
				return &np.Spec.Ingress[i]
			}
		}
	}
	return nil
}

func egressPorts(np *networkingv1.NetworkPolicy) []int32 {
	var out []int32
	for _, r := range np.Spec.Egress {
		for _, p := range r.Ports {
			out = append(out, p.Port.IntVal)
		}
	}
	return out
}

// secretFiles maps each file of the pod's "secrets" volume to "<secret>/<key>".
func secretFiles(pod corev1.PodSpec) map[string]string {
	out := map[string]string{}
	v := volume(pod, "secrets")
	if v == nil || v.Projected == nil {
		return out
	}
	for _, src := range v.Projected.Sources {
		for _, it := range src.Secret.Items {
			out[it.Path] = src.Secret.Name + "/" + it.Key
		}
	}
	return out
}

func envValue(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func volume(pod corev1.PodSpec, name string) *corev1.Volume {
	for i, v := range pod.Volumes {
		if v.Name == name {
			return &pod.Volumes[i]
		}
	}
	return nil
}

// secretVolume returns the Secret the volume name of d's pods holds.
func secretVolume(t *testing.T, d *appsv1.Deployment, name string) string {
	t.Helper()
	v := volume(d.Spec.Template.Spec, name)
	require.NotNil(t, v, "%s: volume %s", d.Name, name)
	require.NotNil(t, v.Secret, "%s: volume %s is a Secret", d.Name, name)
	return v.Secret.SecretName
}

// Package helmtest renders the Helm chart deploy/helm/mantis with Helm's own
// packages for several value sets, decodes every manifest strictly into its
// Kubernetes type, and holds the result to the rules of the installation: probes,
// resources and a non-root read-only container everywhere, a Thorax grace period
// longer than its drain, configurations that the processes' own loaders accept,
// files that the pods mount, and certificates whose identities and names match
// the links that check them.
//
// It is a module of its own so that the main module does not depend on Helm and
// the Kubernetes API types; it imports the main module's configuration and
// identity packages through a replace directive.
package helmtest

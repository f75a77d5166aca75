package metricsserver

import (
	"encoding/json"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mantis-deploy/mantis/internal/version"
)

// VersionPath is where each process says which build it runs.
const VersionPath = "/version"

// BuildInfoName is the family every process exports to say which build it runs.
const BuildInfoName = "mantis_build_info"

// NewBuildInfo returns mantis_build_info: a gauge of 1 whose labels name the running
// build (version, commit, go_version), so that a query can tell which builds a fleet
// runs and a dashboard can mark an upgrade.
func NewBuildInfo() prometheus.Collector {
	info := version.Get()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: BuildInfoName,
		Help: "Always 1; its labels name the running build: version, commit and the Go version that built it.",
		ConstLabels: prometheus.Labels{
			"version": info.Version, "commit": info.Commit, "go_version": info.GoVersion,
		},
	})
	g.Set(1)
	return g
}

// ServeVersion answers with the running build as JSON (version.Info).
func ServeVersion(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(version.Get())
}

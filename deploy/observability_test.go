package deploy_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// The dashboard and the alert rules Mantis ships.
const (
	dashboardFile = "grafana/mantis.json"
	alertsFile    = "prometheus/alerts.yaml"
)

// alertSeverities are the severities an alert may carry (what routing matches).
var alertSeverities = map[string]bool{"critical": true, "warning": true, "info": true}

// grafanaPanel is what the test reads of a dashboard panel; a row holds panels.
type grafanaPanel struct {
	ID      int            `json:"id"`
	Type    string         `json:"type"`
	Title   string         `json:"title"`
	Targets []grafanaQuery `json:"targets"`
	Panels  []grafanaPanel `json:"panels"`
}

type grafanaQuery struct {
	RefID string `json:"refId"`
	Expr  string `json:"expr"`
}

// checkPanels requires of each panel a title and, unless it is a row or text,
// at least one query, each with an expression and its own refId.
func checkPanels(t *testing.T, panels []grafanaPanel, ids map[int]bool) int {
	t.Helper()
	count := 0
	for _, p := range panels {
		require.NotEmpty(t, p.Title, "panel %d has a title", p.ID)
		require.False(t, ids[p.ID], "panel id %d is used twice", p.ID)
		ids[p.ID] = true
		count += checkPanels(t, p.Panels, ids)
		if p.Type == "row" || p.Type == "text" {
			continue
		}
		count++
		require.NotEmpty(t, p.Targets, "panel %q has a query", p.Title)
		refs := map[string]bool{}
		for _, q := range p.Targets {
			require.NotEmpty(t, strings.TrimSpace(q.Expr), "panel %q query %s has an expression", p.Title, q.RefID)
			require.False(t, refs[q.RefID], "panel %q uses refId %q twice", p.Title, q.RefID)
			refs[q.RefID] = true
		}
	}
	return count
}

// The Grafana dashboard is valid JSON and every panel of it queries something.
func TestDashboardPanelsEachHaveAQuery(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(dashboardFile)
	require.NoError(t, err)
	var doc struct {
		Title  string         `json:"title"`
		UID    string         `json:"uid"`
		Panels []grafanaPanel `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(b, &doc), dashboardFile)
	require.NotEmpty(t, doc.Title)
	require.NotEmpty(t, doc.UID)
	require.Positive(t, checkPanels(t, doc.Panels, map[int]bool{}), "the dashboard has panels")
}

type alertRule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         *string           `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// Every alert rule is valid YAML with a name, an expression, an explicit for
// (0s for an alert that fires on the first evaluation), a known severity and a
// summary.
func TestAlertRulesHaveExprForAndSeverity(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(alertsFile)
	require.NoError(t, err)
	var doc struct {
		Groups []struct {
			Name  string      `json:"name"`
			Rules []alertRule `json:"rules"`
		} `json:"groups"`
	}
	require.NoError(t, yaml.UnmarshalStrict(b, &doc), alertsFile)
	require.NotEmpty(t, doc.Groups)
	names := map[string]bool{}
	for _, g := range doc.Groups {
		require.NotEmpty(t, g.Name)
		require.NotEmpty(t, g.Rules, "group %s has rules", g.Name)
		for _, r := range g.Rules {
			require.NotEmpty(t, r.Alert, "group %s: a rule without a name", g.Name)
			require.False(t, names[r.Alert], "alert %s is defined twice", r.Alert)
			names[r.Alert] = true
			require.NotEmpty(t, strings.TrimSpace(r.Expr), "%s has an expr", r.Alert)
			require.NotNil(t, r.For, "%s has a for (0s to fire at once)", r.Alert)
			_, err := time.ParseDuration(*r.For)
			require.NoError(t, err, "%s: for %q", r.Alert, *r.For)
			require.True(t, alertSeverities[r.Labels["severity"]], "%s: severity %q", r.Alert, r.Labels["severity"])
			require.NotEmpty(t, r.Annotations["summary"], "%s has a summary", r.Alert)
		}
	}
}

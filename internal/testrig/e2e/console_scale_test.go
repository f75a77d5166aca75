package e2e_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	apitypes "github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/contract/events"
	"github.com/mantis-deploy/mantis/schema"
)

// The console's figures: a deployment page of scaleTargets targets paints within
// maxGridPaint of navigation start, and the page takes eventsPerSecond events without
// dropping one.
const (
	scaleTargets    = 200
	maxGridPaint    = time.Second
	eventsPerSecond = 200
	injectedEvents  = 1000
	// paintLoads is how many times the page is loaded; the median must be within
	// maxGridPaint (the machine the tests share has bursts of load that one load may hit).
	paintLoads = 5
)

// perfTime is a Performance API time in milliseconds as a duration.
func perfTime(v float64) time.Duration {
	return time.Duration(v * float64(time.Millisecond)).Round(time.Millisecond)
}

// measureConsoleScale opens the page of id, a deployment over scaleTargets targets, reads
// when its grid was rendered, and then writes injectedEvents target.output events to
// the event log at eventsPerSecond and checks the page counted every one.
func measureConsoleScale(t *testing.T, c *execCluster, b *browser, id uuid.UUID) {
	t.Helper()
	paints := make([]time.Duration, paintLoads)
	for i := range paints {
		b.open("/ui/deployments/" + id.String())
		b.wait("waiting for the grid", consoleJS+".rendered === true", 30*time.Second)
		require.Equal(t, scaleTargets, eval[int](b, `document.querySelectorAll("#grid tbody tr").length`))
		m := eval[map[string]float64](b, `({paint: performance.getEntriesByName("mantis-grid-rendered")[0].startTime,
			start: `+consoleJS+`.fetchStart, fetch: `+consoleJS+`.fetchMs, render: `+consoleJS+`.renderMs})`)
		paints[i] = perfTime(m["paint"])
		fmt.Printf("console: a %d-target deployment page rendered its grid %s after navigation start (load %d: script started the API call at %s, the answer took %s, rendering %s)\n",
			scaleTargets, paints[i], i+1, perfTime(m["start"]), perfTime(m["fetch"]), perfTime(m["render"]))
	}
	slices.Sort(paints)
	median := paints[len(paints)/2]
	fmt.Printf("console: grid paint of %d targets over %d loads: median %s, fastest %s, slowest %s\n", scaleTargets, paintLoads, median, paints[0], paints[len(paints)-1])
	require.Less(t, median, maxGridPaint, "the grid of %d targets must paint within %s", scaleTargets, maxGridPaint)
	b.wait("waiting for the live stream", `document.querySelector("#live-state").textContent.startsWith("Live")`, 30*time.Second)
	before := b.counter("byType['target.output']")
	start := time.Now()
	injectOutputEvents(t, c, id)
	injected := time.Since(start)
	b.wait("waiting for every event to reach the page",
		fmt.Sprintf(`(%s.byType["target.output"] || 0) >= %d`, consoleJS, before+injectedEvents), time.Minute)
	all := time.Since(start)
	require.Equal(t, before+injectedEvents, b.counter("byType['target.output']"), "each injected event reached the page once")
	span := eval[float64](b, consoleJS+`.lastAt["target.output"] - `+consoleJS+`.firstAt["target.output"]`) / 1000
	rate := float64(injectedEvents) / injected.Seconds()
	fmt.Printf("console: %d target.output events written at %.0f/s; the page received all %d over %.1fs (%.0f events/s), the last %s after the first was written\n",
		injectedEvents, rate, injectedEvents, span, float64(injectedEvents)/span, all.Round(time.Millisecond))
	require.GreaterOrEqual(t, rate, float64(eventsPerSecond)*0.9, "the database took the events slower than %d/s, so the page was not offered that rate", eventsPerSecond)
	require.GreaterOrEqual(t, float64(injectedEvents)/span, float64(eventsPerSecond)*0.9, "the page must keep up with %d events/s", eventsPerSecond)
}

// createWideDeployment registers scaleTargets poll targets that no agent serves and
// creates a deployment over all of them through the API; its requests stay pending,
// and it is cancelled when the test ends.
func createWideDeployment(t *testing.T, c *execCluster) uuid.UUID {
	t.Helper()
	names := make([]string, scaleTargets)
	for i := range names {
		names[i] = fmt.Sprintf("wide-%03d", i)
		_, err := schema.RegisterTarget(c.ctx, c.pool, schema.NewTarget{Name: names[i], Mode: schema.ModePoll}, c.heartbeatTimeout)
		require.NoError(t, err)
	}
	spec, err := json.Marshal(map[string]any{"name": "wide", "targets": names, "max_parallel": 0, "steps": []map[string]string{
		{"name": "prepare", "command": "true"}, {"name": "install", "command": "true"}, {"name": "verify", "command": "true"}}})
	require.NoError(t, err)
	var created apitypes.CreatedDeployment
	consoleAPI(t, c, http.MethodPost, "/api/v1/deployments", spec, http.StatusAccepted, &created)
	t.Cleanup(func() {
		consoleAPI(t, c, http.MethodPost, "/api/v1/deployments/"+created.ID.String()+"/cancel", nil, 0, nil)
	})
	return created.ID
}

// consoleAPI calls the API with the bearer token and decodes the answer into out;
// want, unless 0, is the status expected.
func consoleAPI(t *testing.T, c *execCluster, method, path string, body []byte, want int, out any) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+c.mandible.HTTPAddr+path, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+apiToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	if want != 0 {
		require.Equal(t, want, resp.StatusCode, "%s %s", method, path)
	}
	if out != nil {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(out))
	}
}

// injectOutputEvents writes injectedEvents target.output events for the deployment
// at eventsPerSecond, as Mandible writes live output.
// The events are written by injectWriters writers, each injectTicksPerSecond times a
// second in one transaction, so that the rate holds on a loaded machine where one
// writer making a round trip per event would not.
const (
	injectWriters        = 4
	injectTicksPerSecond = 10
)

// injectOutputEvents writes injectedEvents target.output events for the deployment at
// eventsPerSecond in all, as Mandible writes live output.
func injectOutputEvents(t *testing.T, c *execCluster, id uuid.UUID) {
	t.Helper()
	perWriter := injectedEvents / injectWriters
	perTick := eventsPerSecond / injectWriters / injectTicksPerSecond
	errs := make(chan error, injectWriters)
	for w := range injectWriters {
		go func() { errs <- writeOutputEvents(c, id, w*perWriter, perWriter, perTick) }()
	}
	for range injectWriters {
		require.NoError(t, <-errs)
	}
}

// writeOutputEvents writes count events numbered from first, perTick at each tick.
func writeOutputEvents(c *execCluster, id uuid.UUID, first, count, perTick int) error {
	tick := time.NewTicker(time.Second / injectTicksPerSecond)
	defer tick.Stop()
	step := 1
	for i := first; i < first+count; i += perTick {
		<-tick.C
		tx, err := c.pool.Begin(c.ctx)
		if err != nil {
			return err
		}
		for j := i; j < i+perTick && j < first+count; j++ {
			data := events.TargetOutputData{DeploymentID: &id, Step: &step, Target: fmt.Sprintf("wide-%03d", j%scaleTargets),
				RequestID: uuid.New(), CommandID: uuid.New(), Seq: int64(j / scaleTargets), Data: fmt.Appendf(nil, "line %d\n", j)}
			if err := schema.InsertEvent(c.ctx, tx, &id, events.TargetOutput, data); err != nil {
				_ = tx.Rollback(c.ctx)
				return err
			}
		}
		if err := tx.Commit(c.ctx); err != nil {
			return err
		}
	}
	return nil
}

package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// The browser test's contract with the environment: the axe-core build `make
// console-tools` fetches, and where screenshots go.
const (
	axeVersion = "4.14.1"
	// axePathVar overrides where axe.min.js is read from.
	axePathVar = "MANTIS_AXE_JS"
	// screenshotDirVar, when set, is where the screenshots are written (a new
	// temporary directory otherwise); the test prints it.
	screenshotDirVar = "MANTIS_CONSOLE_SCREENSHOTS"
	// updateScreenshotsVar, set to 1, copies the 1280 px screenshots to docs/screenshots.
	updateScreenshotsVar = "MANTIS_UPDATE_SCREENSHOTS"
	// consoleJS is the global the console's script keeps its counters in.
	consoleJS = "window.__mantis"
)

// Widths the console is checked at.
const (
	desktopWidth, desktopHeight = 1280, 900
	phoneWidth, phoneHeight     = 390, 844
)

// browser is a headless Chromium driven over the DevTools protocol.
type browser struct {
	t        *testing.T
	ctx      context.Context
	base     string
	axe      string
	shotsDir string
}

// repoRoot is the module's root (where go.mod is).
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, dir, parent, "go.mod not found above the test's directory")
		dir = parent
	}
}

// newBrowser starts headless Chromium for base (http://host:port). It fails, saying
// what to run, when Chromium or axe-core is missing.
func newBrowser(t *testing.T, base string) *browser {
	t.Helper()
	chromium, err := exec.LookPath("chromium")
	require.NoError(t, err, "chromium is missing: `mantisctl dev install --test-packages` installs it, as `make test` does")
	axePath := os.Getenv(axePathVar)
	if axePath == "" {
		axePath = filepath.Join(repoRoot(t), ".mantis", "cache", "axe-core-"+axeVersion, "axe.min.js")
	}
	axe, err := os.ReadFile(axePath)
	require.NoError(t, err, "axe-core %s is missing at %s: run `make console-tools` (npm pack axe-core@%s)", axeVersion, axePath, axeVersion)

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox,
		chromedp.WindowSize(desktopWidth, desktopHeight), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelCtx(); cancelAlloc() })
	// axe-core is evaluated into the pages, whose policy admits only their own script.
	_, err = chromedp.Call(ctx, page.SetBypassCSP, page.SetBypassCSPParams{Enabled: true})
	require.NoError(t, err, "starting chromium")

	dir := os.Getenv(screenshotDirVar)
	if dir == "" {
		dir, err = os.MkdirTemp("", "mantis-console-shots-")
		require.NoError(t, err)
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	t.Logf("console screenshots: %s", dir)
	return &browser{t: t, ctx: ctx, base: base, axe: string(axe), shotsDir: dir}
}

// run runs actions with a bound, failing the test with what was being done.
func (b *browser) run(what string, timeout time.Duration, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	require.NoError(b.t, chromedp.Do(ctx, actions...), "browser: %s", what)
}

// result runs one action that returns a value, with a bound.
func result[T any](b *browser, what string, timeout time.Duration, a chromedp.Action[T]) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	require.NoError(b.t, err, "browser: %s", what)
	return v
}

// eval evaluates expr in the page, awaiting a promise.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	return result(b, "evaluating "+firstLine(expr), 30*time.Second, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
}

// text is the text of the element sel selects.
func (b *browser) text(sel string) string {
	b.t.Helper()
	return result(b, "reading "+sel, 10*time.Second, chromedp.Text(chromedp.CSS(sel)))
}

// wait waits up to timeout until the JavaScript expression is true.
func (b *browser) wait(what, expr string, timeout time.Duration) {
	b.t.Helper()
	b.run(what, timeout+5*time.Second, chromedp.Poll[chromedp.Void](expr,
		chromedp.WithPollingTimeout(timeout), chromedp.WithPollingInterval(20*time.Millisecond)))
}

// waitVisible waits until the element sel selects is visible.
func (b *browser) waitVisible(what, sel string, timeout time.Duration) {
	b.t.Helper()
	b.run(what, timeout, chromedp.WaitVisible(chromedp.CSS(sel)))
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	if len(line) > 80 {
		line = line[:80]
	}
	return line
}

// open navigates to the console's path and waits for its main landmark.
func (b *browser) open(path string) {
	b.t.Helper()
	b.run("opening "+path, 30*time.Second, chromedp.Navigate(b.base+path), chromedp.WaitVisible(chromedp.CSS("main")))
}

// width sets the viewport's size.
func (b *browser) width(w, h int64) {
	b.t.Helper()
	b.run(fmt.Sprintf("resizing to %d px", w), 10*time.Second, chromedp.EmulateViewport(w, h))
}

// axeViolation is one rule axe-core found broken on a page.
type axeViolation struct {
	ID      string   `json:"id"`
	Impact  string   `json:"impact"`
	Help    string   `json:"help"`
	Targets []string `json:"targets"`
}

// checkAccessible runs axe-core on the page and fails on any serious or critical
// violation, listing each with the elements at fault.
func (b *browser) checkAccessible(name string) {
	b.t.Helper()
	var bad []string
	for _, v := range b.axeViolations(name) {
		if v.Impact == "serious" || v.Impact == "critical" {
			bad = append(bad, fmt.Sprintf("%s (%s): %s at %v", v.ID, v.Impact, v.Help, v.Targets))
		}
	}
	require.Empty(b.t, bad, "axe-core found serious or critical violations on %s", name)
	b.t.Logf("axe-core: %s has no serious or critical violation", name)
}

// checkAxeCatches adds a button without a name to the page and checks that axe-core
// reports it, so that a clean report means the rules ran.
func (b *browser) checkAxeCatches() {
	b.t.Helper()
	eval[chromedp.Void](b, `document.querySelector("main").append(Object.assign(document.createElement("button"), {id: "axe-bait"}))`)
	var ids []string
	for _, v := range b.axeViolations("a page with a nameless button") {
		ids = append(ids, v.ID+" ("+v.Impact+")")
	}
	eval[chromedp.Void](b, `document.querySelector("#axe-bait").remove()`)
	require.Contains(b.t, ids, "button-name (critical)", "axe-core must report a button without a name")
}

// axeViolations loads axe-core into the page and returns what it reports.
func (b *browser) axeViolations(name string) []axeViolation {
	b.t.Helper()
	require.True(b.t, eval[bool](b, b.axe+"\n;typeof axe === 'object'"), "axe-core did not load in %s", name)
	raw := eval[string](b, `axe.run(document, {resultTypes: ["violations"]}).then(r => JSON.stringify(r.violations.map(v => ({
		id: v.id, impact: v.impact, help: v.help, targets: v.nodes.slice(0, 5).map(n => n.target.join(" "))}))))`)
	var all []axeViolation
	require.NoError(b.t, json.Unmarshal([]byte(raw), &all))
	return all
}

// screenshot saves the page (whole, or what the viewport shows) as <name>.png in
// the screenshot directory and, when asked to, copies it to docs/screenshots.
func (b *browser) screenshot(name string, whole, docs bool) {
	b.t.Helper()
	shot := chromedp.CaptureScreenshot()
	if whole {
		shot = chromedp.FullScreenshot(100)
	}
	png := result(b, "screenshot "+name, 30*time.Second, shot)
	path := filepath.Join(b.shotsDir, name+".png")
	require.NoError(b.t, os.WriteFile(path, png, 0o644))
	if docs && os.Getenv(updateScreenshotsVar) == "1" {
		require.NoError(b.t, os.WriteFile(filepath.Join(repoRoot(b.t), "docs", "screenshots", name+".png"), png, 0o644))
	}
}

// counter reads one of the console script's counters.
func (b *browser) counter(name string) int {
	b.t.Helper()
	return eval[int](b, consoleJS+"."+name+" || 0")
}

package e2e_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// consoleTimeout bounds each wait of the browser test for the stack to act.
const consoleTimeout = 2 * time.Minute

// The console in headless Chromium against a real Mandible, Thorax and agents: sign
// in, refuse a broken spec inline, create a deployment from the form, watch its grid
// fill in over SSE, read every page, check each with axe-core at 1280 and 390 px,
// and sign out.
func TestConsoleInARealBrowser(t *testing.T) {
	s := setupExec(t)
	b := newBrowser(t, "http://"+s.mandible.HTTPAddr)

	signInThroughConsole(t, b)
	id := createDeploymentInConsole(t, b, s.poll.Name, s.listen.Name)
	watchDeploymentSucceed(t, b, id)
	checkConsolePages(t, b, s.poll.Name, s.listen.Name)
	if decisionsRouted(t, s.execCluster) {
		decideInConsole(t, b, s.poll.Name, s.listen.Name)
	} else {
		t.Log("this Mandible serves no decisions route: approve and retry are not checked")
	}
	wide := createWideDeployment(t, s.execCluster)
	checkQueueWaiting(t, b)
	measureConsoleScale(t, s.execCluster, b, wide)

	b.open("/ui/")
	b.run("signing out", 30*time.Second, chromedp.Click(chromedp.CSS(".signout button")),
		chromedp.WaitVisible(chromedp.CSS("#token")))
	b.open("/ui/queue")
	require.Equal(t, "/ui/signin", eval[string](b, "location.pathname"), "after signing out a console page sends the browser to sign in")
}

// signInThroughConsole signs in with a wrong token (refused) and then the right one,
// and checks the session cookie the browser holds.
func signInThroughConsole(t *testing.T, b *browser) {
	t.Helper()
	b.open("/ui/queue")
	require.Equal(t, "/ui/signin?next=%2Fui%2Fqueue", eval[string](b, "location.pathname + location.search"), "a console page without a session sends the browser to sign in")
	b.checkAxeCatches()
	b.checkAccessible("the sign-in page")

	b.run("signing in with a wrong token", 30*time.Second, chromedp.SendKeys(chromedp.CSS("#token"), "not-a-token"),
		chromedp.Submit(chromedp.CSS("#token")), chromedp.WaitVisible(chromedp.CSS("#signin-problem")))
	require.Equal(t, "unknown API token", b.text("#signin-problem"))

	b.run("signing in", 30*time.Second, chromedp.SendKeys(chromedp.CSS("#token"), apiToken),
		chromedp.Submit(chromedp.CSS("#token")), chromedp.WaitVisible(chromedp.CSS("#counts")))
	got, err := chromedp.Call(b.ctx, network.GetCookies, network.GetCookiesParams{})
	require.NoError(t, err)
	cookies := got.Cookies
	require.Len(t, cookies, 1)
	require.Equal(t, "mantis_console", cookies[0].Name)
	require.True(t, cookies[0].HTTPOnly, "the session cookie is HttpOnly")
	require.Equal(t, network.CookieSameSiteStrict, cookies[0].SameSite, "the session cookie is SameSite=Strict")
}

// createDeploymentInConsole submits a broken spec (its problems appear next to the
// field), then a good one, and returns the id of the deployment page it lands on.
func createDeploymentInConsole(t *testing.T, b *browser, poll, listen string) string {
	t.Helper()
	b.open("/ui/deployments/new")
	b.checkAccessible("the new-deployment page")
	broken := fmt.Sprintf("name: broken\ntargets: [%s]\nsteps:\n  - name: first\n    command: \"\"\n", poll)
	b.run("submitting a broken spec", 30*time.Second, chromedp.SetValue(chromedp.CSS("#spec"), broken),
		chromedp.Click(chromedp.CSS(`#new-deployment button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS("#spec-errors li")))
	require.Contains(t, b.text("#spec-errors"), "steps[0].command", "the API's field problem is shown next to the spec")
	require.Equal(t, "true", eval[string](b, `document.querySelector("#spec").getAttribute("aria-invalid")`))

	good := fmt.Sprintf("name: console-release\ntargets: [%s, %s]\nsteps:\n"+
		"  - name: greet\n    command: echo hello from $(hostname)\n"+
		"  - name: settle\n    command: sleep 1 && echo settled\n", poll, listen)
	b.run("creating a deployment", consoleTimeout, chromedp.SetValue(chromedp.CSS("#spec"), good),
		chromedp.Click(chromedp.CSS(`#new-deployment button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS("#grid tbody tr")))
	path := eval[string](b, "location.pathname")
	id, ok := strings.CutPrefix(path, "/ui/deployments/")
	require.True(t, ok, "the form goes on to the deployment's page, not %s", path)
	return id
}

// watchDeploymentSucceed waits on the deployment's page until its grid shows every
// cell succeeded, and checks that the events which filled it came over SSE.
func watchDeploymentSucceed(t *testing.T, b *browser, id string) {
	t.Helper()
	b.wait("waiting for the grid to fill in",
		`document.querySelectorAll("#grid tbody .s-succeeded").length === 4 && !!document.querySelector("#summary .s-succeeded")`,
		consoleTimeout)
	require.GreaterOrEqual(t, b.counter("byType['target.succeeded']"), 4, "every cell turned succeeded from a live event")
	require.GreaterOrEqual(t, b.counter("byType['deployment.succeeded']"), 1)
	require.Equal(t, 2, eval[int](b, `document.querySelectorAll("#grid tbody tr").length`), "one row per target")
	b.checkAccessible("the deployment page at 1280 px")
	b.screenshot("console-deployment-1280", true, true)
	b.width(phoneWidth, phoneHeight)
	b.checkAccessible("the deployment page at 390 px")
	b.screenshot("console-deployment-390", true, false)
	b.width(desktopWidth, desktopHeight)
	b.wait("waiting for the live output", `document.querySelector("#output").textContent.includes("settled")`, 30*time.Second)
	require.Positive(t, b.counter("byType['target.output']"), "the output pane was filled by live target.output events")
	t.Logf("deployment %s succeeded on the page, %d events received live", id, b.counter("events"))
}

// checkConsolePages reads the list, targets, queue and DLQ pages and checks each.
func checkConsolePages(t *testing.T, b *browser, poll, listen string) {
	t.Helper()
	b.open("/ui/?name=console-release")
	b.waitVisible("reading the list", "#deployments tbody .s-succeeded", 30*time.Second)
	require.Contains(t, b.text("#deployments tbody"), "console-release")
	b.checkAccessible("the deployments page")

	b.open("/ui/targets")
	b.waitVisible("reading instances", "#instances tbody .s-live", 30*time.Second)
	targets := b.text("#targets tbody")
	require.Contains(t, targets, poll)
	require.Contains(t, targets, listen)
	b.checkAccessible("the targets page")

	b.open("/ui/queue")
	b.wait("reading the queue", `!document.querySelector("#requests tbody").textContent.startsWith("Loading")`, 30*time.Second)
	require.Equal(t, "4", b.text("#counts tbody tr:nth-child(3) td:last-child"), "the queue counts the deployment's four dispatched requests")
	b.checkAccessible("the queue page")

	b.open("/ui/dlq")
	b.wait("reading the DLQ page", `!document.querySelector("#dlq-depth").textContent.startsWith("Loading")`, 30*time.Second)
	b.checkAccessible("the DLQ page")
}

// checkQueueWaiting reads the queue page while the wide deployment's requests wait
// for targets no agent serves, each with the reason it waits.
func checkQueueWaiting(t *testing.T, b *browser) {
	t.Helper()
	b.open("/ui/queue")
	b.wait("waiting for the wide deployment's requests on the queue page",
		`document.querySelector("#requests tbody").textContent.includes("wide-")`, consoleTimeout)
	b.checkAccessible("the queue page with waiting requests at 1280 px")
	b.screenshot("console-queue-1280", false, true)
	b.width(phoneWidth, phoneHeight)
	b.checkAccessible("the queue page with waiting requests at 390 px")
	b.screenshot("console-queue-390", false, false)
	b.width(desktopWidth, desktopHeight)
}

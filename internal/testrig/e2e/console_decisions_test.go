package e2e_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// decisionsRouted reports whether the Mandible under test documents the decisions
// route, which the console's decision buttons call.
func decisionsRouted(t *testing.T, c *execCluster) bool {
	t.Helper()
	resp, err := http.Get("http://" + c.mandible.HTTPAddr + "/api/v1/openapi.yaml")
	require.NoError(t, err)
	defer resp.Body.Close()
	doc, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return strings.Contains(string(doc), "/api/v1/deployments/{id}/decisions:")
}

// decideInConsole creates a deployment whose first step waits for an approval and
// whose second fails on the first target to run it and asks what to do; it approves
// with the page's button, retries the failed target with the next, and watches the
// deployment succeed.
func decideInConsole(t *testing.T, b *browser, poll, listen string) {
	t.Helper()
	marker := filepath.Join(os.TempDir(), uniqueName("console-retry"))
	t.Cleanup(func() { _ = os.RemoveAll(marker) })
	spec := fmt.Sprintf("name: console-decisions\ntargets: [%s, %s]\nsteps:\n"+
		"  - name: go-ahead\n    kind: approval\n    allow_self_approval: true\n"+
		"  - name: risky\n    on_failure: ask\n"+
		"    command: if mkdir %s 2>/dev/null; then echo first run fails; exit 3; fi; echo retried\n", poll, listen, marker)
	b.open("/ui/deployments/new")
	b.run("creating a deployment that waits", consoleTimeout, chromedp.SetValue(chromedp.CSS("#spec"), spec),
		chromedp.Click(chromedp.CSS(`#new-deployment button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#actions button[data-decision="approve"]`)))
	require.Contains(t, b.text("#waiting"), "approval")
	b.checkAccessible("a deployment waiting for an approval")

	b.run("approving", consoleTimeout, chromedp.SendKeys(chromedp.CSS("#comment"), "looks good"),
		chromedp.Click(chromedp.CSS(`#actions button[data-decision="approve"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#actions button[data-decision="retry"]`)))
	require.Contains(t, b.text("#action-result"), "Recorded: approve")
	require.Equal(t, 1, eval[int](b, `document.querySelectorAll("#grid tbody .s-failed").length`), "one target failed the risky step")
	require.Contains(t, b.text("#analysis"), "Exit 3")
	b.screenshot("console-deployment-waiting-1280", true, true)

	b.run("retrying the failed target", consoleTimeout, chromedp.Click(chromedp.CSS(`#actions button[data-decision="retry"]`)))
	b.wait("waiting for the retry to succeed",
		`document.querySelectorAll("#grid tbody .s-succeeded").length === 2 && !!document.querySelector("#summary .s-succeeded")`,
		consoleTimeout)
	require.GreaterOrEqual(t, b.counter("byType['deployment.waiting']"), 2, "both waits reached the page live")
	require.GreaterOrEqual(t, b.counter("byType['deployment.decided']"), 2, "both decisions reached the page live")
	t.Log("approved and retried through the console; the deployment succeeded")
}

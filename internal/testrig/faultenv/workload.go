package faultenv

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"sync"
	"time"
)

// Workload shape: a deployment of StepsPerDeployment steps on TargetsPerDeployment
// targets every Interval, each command appending its ledger line and then sleeping.
const (
	TargetsPerDeployment = 4
	StepsPerDeployment   = 2
	// submitGiveUp bounds how long a submission is retried after the workload stops.
	submitGiveUp = 2 * time.Minute
	// submitRetry is the pause between two tries of one submission.
	submitRetry = time.Second
)

// WorkloadOptions tunes the stream; zero fields take the defaults (one deployment a
// second, commands of one second).
type WorkloadOptions struct {
	Interval     time.Duration
	CommandSleep time.Duration
	// Targets, when set, are the only targets deployed to.
	Targets []string
}

// Submitted is a deployment the API accepted.
type Submitted struct {
	ID          string
	Key         string
	Targets     []string
	SubmittedAt time.Time
}

// Workload submits a stream of deployments until Stop, retrying each submission with
// its idempotency key until the API accepts it, as a careful client does.
type Workload struct {
	c    *Cluster
	opts WorkloadOptions

	mu       sync.Mutex
	accepted []Submitted
	refused  []string // keys never accepted

	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
}

// StartWorkload starts the stream.
func (c *Cluster) StartWorkload(o WorkloadOptions) *Workload {
	if o.Interval == 0 {
		o.Interval = time.Second
	}
	if o.CommandSleep == 0 {
		o.CommandSleep = time.Second
	}
	if len(o.Targets) == 0 {
		o.Targets = c.TargetNames()
	}
	w := &Workload{c: c, opts: o, stop: make(chan struct{})}
	w.wg.Add(1)
	go w.run()
	c.t.Cleanup(w.Stop)
	return w
}

func (w *Workload) run() {
	defer w.wg.Done()
	tick := time.NewTicker(w.opts.Interval)
	defer tick.Stop()
	for {
		w.wg.Add(1)
		go func() { defer w.wg.Done(); w.submit() }()
		select {
		case <-w.stop:
			return
		case <-tick.C:
		}
	}
}

// Stop ends the stream and waits for the submissions under way.
func (w *Workload) Stop() {
	w.stopOnce.Do(func() { close(w.stop) })
	w.wg.Wait()
}

// Accepted lists the deployments the API accepted.
func (w *Workload) Accepted() []Submitted {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Submitted(nil), w.accepted...)
}

// Refused lists the idempotency keys of submissions never accepted.
func (w *Workload) Refused() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.refused...)
}

// LedgerCommand is a step's command: one ledger line "request id,target,step,pid,time"
// appended to the target's file, then a sleep.
func LedgerCommand(ledgerDir, step string, sleep time.Duration) string {
	return fmt.Sprintf(`printf '%%s,%%s,%%s,%%s,%%s\n' "$MANTIS_DISPATCH_REQUEST_ID" "$MANTIS_TARGET" %s "$$" "$(date +%%s.%%N)" >> %s/"$MANTIS_TARGET"; sleep %.1f`,
		step, filepath.Clean(ledgerDir), sleep.Seconds())
}

// DeploymentSpec is the JSON of a workload deployment.
func DeploymentSpec(key, ledgerDir string, targets []string, sleep time.Duration) string {
	steps := make([]map[string]string, StepsPerDeployment)
	for i := range steps {
		name := fmt.Sprintf("s%d", i+1)
		steps[i] = map[string]string{"name": name, "command": LedgerCommand(ledgerDir, name, sleep), "timeout": "2m"}
	}
	b, _ := json.Marshal(map[string]any{"name": "fault-" + key[:8], "targets": targets, "steps": steps, "idempotency_key": key})
	return string(b)
}

func (w *Workload) submit() {
	key := randomHex(12)
	targets := pick(w.opts.Targets, TargetsPerDeployment)
	spec := DeploymentSpec(key, w.c.LedgerDir, targets, w.opts.CommandSleep)
	var deadline <-chan time.Time
	for {
		code, out := w.c.API(http.MethodPost, "/api/v1/deployments", spec)
		if code == http.StatusAccepted || code == http.StatusOK {
			id, _ := out["id"].(string)
			w.mu.Lock()
			w.accepted = append(w.accepted, Submitted{ID: id, Key: key, Targets: targets, SubmittedAt: time.Now()})
			w.mu.Unlock()
			return
		}
		if deadline == nil {
			select {
			case <-w.stop:
				deadline = time.After(submitGiveUp)
			default:
			}
		}
		select {
		case <-deadline:
			w.mu.Lock()
			w.refused = append(w.refused, key)
			w.mu.Unlock()
			return
		case <-time.After(submitRetry):
		}
	}
}

// SubmitAndWait submits one deployment to targets and waits up to timeout for it to
// end; it returns its id and status ("" when it did not end).
func (c *Cluster) SubmitAndWait(targets []string, timeout time.Duration) (string, string) {
	key := randomHex(12)
	spec := DeploymentSpec(key, c.LedgerDir, targets, 100*time.Millisecond)
	deadline := time.Now().Add(timeout)
	var id string
	for id == "" && time.Now().Before(deadline) {
		code, out := c.API(http.MethodPost, "/api/v1/deployments", spec)
		if code == http.StatusAccepted || code == http.StatusOK {
			id, _ = out["id"].(string)
			break
		}
		<-time.After(submitRetry)
	}
	for id != "" && time.Now().Before(deadline) {
		var status string
		if err := c.Pool.QueryRow(c.Ctx, `SELECT status FROM deployments WHERE id = $1`, id).Scan(&status); err == nil &&
			(status == "succeeded" || status == "failed" || status == "cancelled") {
			return id, status
		}
		<-time.After(200 * time.Millisecond)
	}
	return id, ""
}

func pick(names []string, n int) []string {
	if n >= len(names) {
		return append([]string(nil), names...)
	}
	idx := rand.Perm(len(names))[:n]
	out := make([]string, n)
	for i, j := range idx {
		out[i] = names[j]
	}
	return out
}

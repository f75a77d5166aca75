package soak

import (
	"fmt"
	"strings"
	"time"
)

// ProcessReport is one process's minutes and verdicts.
type ProcessReport struct {
	Name    string
	Minutes []Minute
	// Failures counts readings that missed a figure.
	Failures int
	// Drained is the process once the load has stopped and its work has ended
	// (nil when not read): what returns to the baseline grew with the load, what
	// does not is held.
	Drained  *Minute
	Verdicts []Verdict
}

// Report is the outcome of a soak.
type Report struct {
	Date     time.Time
	Machine  string
	Duration time.Duration
	// Rate is the dispatch requests per second offered; DeployEvery the interval
	// of deployments.
	Rate        int
	DeployEvery time.Duration
	Load        LoadTotals
	Processes   []ProcessReport
	Latency     []LatencyMinute
	Deployments []DeploymentMinute
	// CPU is what each group of processes used while the load ran.
	CPU []CPUUse
	// Rework is the work done for the requests created while the load ran.
	Rework *Rework
	// Problems are failures of the run other than a figure that was not flat
	// (requests that did not succeed, load the API refused).
	Problems []string
}

// NotFlat lists the verdicts that failed.
func (r Report) NotFlat() []Verdict {
	var out []Verdict
	for _, p := range r.Processes {
		for _, v := range p.Verdicts {
			if !v.Flat {
				out = append(out, v)
			}
		}
	}
	return out
}

// Markdown renders the report: the run, the latency per minute, a table per
// process, and the verdicts.
func (r Report) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Soak of %s on %s, %s: %d dispatch requests/s (`true` on the agents) and a deployment every %s.\n\n",
		r.Duration, r.Date.UTC().Format(time.DateOnly), r.Machine, r.Rate, r.DeployEvery)
	fmt.Fprintf(&b, "Dispatch requests: %d accepted, %d refused, %d not sent (transport errors).\n\n",
		r.Load.Accepted, r.Load.Refused, r.Load.Failed)
	b.WriteString(r.latencyTable())
	b.WriteString(r.cpuTable())
	if r.Rework != nil {
		b.WriteString(r.Rework.Markdown())
	}
	for _, p := range r.Processes {
		fmt.Fprintf(&b, "\n**%s**", p.Name)
		if p.Failures > 0 {
			fmt.Fprintf(&b, " (%d readings missed a figure)", p.Failures)
		}
		b.WriteString("\n\n| minute | RSS MiB | goroutines | open fds | db conns |\n|---|---|---|---|---|\n")
		for _, m := range p.Minutes {
			fmt.Fprintf(&b, "| %d | %.1f | %s | %s | %s |\n", m.Index, float64(m.RSS)/(1<<20),
				count(m.Goroutines), count(m.FDs), count(m.DBConns))
		}
		if d := p.Drained; d != nil {
			fmt.Fprintf(&b, "| after the drain | %.1f | %s | %s | %s |\n", float64(d.RSS)/(1<<20),
				count(d.Goroutines), count(d.FDs), count(d.DBConns))
		}
	}
	b.WriteString("\nVerdicts (flat: RSS grows < 10% from minute 2 to the last minute; goroutines, open fds and db conns end within ±5 of minute 2; each minute is the median of its samples):\n\n")
	for _, p := range r.Processes {
		for _, v := range p.Verdicts {
			fmt.Fprintf(&b, "- %s\n", v)
		}
	}
	if len(r.Problems) > 0 {
		b.WriteString("\nProblems:\n\n")
		for _, p := range r.Problems {
			fmt.Fprintf(&b, "- %s\n", p)
		}
	}
	return b.String()
}

func (r Report) latencyTable() string {
	var b strings.Builder
	deps := map[int]DeploymentMinute{}
	for _, d := range r.Deployments {
		deps[d.Index] = d
	}
	b.WriteString("| minute | requests enqueued | of them succeeded | p50 enqueue→succeeded | p99 | succeeded during the minute | deployments created | succeeded | failed | unended |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, l := range r.Latency {
		d := deps[l.Index]
		p50, p99 := "–", "–" // none of the minute's requests succeeded
		if l.Succeeded > 0 {
			p50, p99 = l.P50.String(), l.P99.String()
		}
		fmt.Fprintf(&b, "| %d | %d | %d | %s | %s | %d | %d | %d | %d | %d |\n", l.Index, l.Enqueued, l.Succeeded,
			p50, p99, l.Completed, d.Created, d.Succeeded, d.Failed, d.Unended)
	}
	return b.String()
}

// cpuTable shows where the CPU went while the load ran: per group, the cores it kept
// busy and its CPU time per dispatch request that succeeded.
func (r Report) cpuTable() string {
	if len(r.CPU) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\nCPU while the load ran:\n\n| processes | CPU | cores busy | CPU per succeeded request |\n|---|---|---|---|\n")
	for _, u := range r.CPU {
		per := "–"
		if u.PerRequest > 0 {
			per = u.PerRequest.Round(10 * time.Microsecond).String()
		}
		fmt.Fprintf(&b, "| %s | %s | %.2f | %s |\n", u.Group, u.CPU.Round(10*time.Millisecond), u.Cores, per)
	}
	return b.String()
}

func count(n int) string {
	if n == Unknown {
		return "–"
	}
	return fmt.Sprint(n)
}

package scale

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Report is the outcome of a scale run.
type Report struct {
	Date time.Time
	// Machine is the cores and memory; LoadBefore and LoadAfter the load averages
	// at the start and the end of the run.
	Machine, LoadBefore, LoadAfter string
	// Temporal names the Temporal server the run used.
	Temporal string
	Sizes    []Size
	Model    Model
	// Target is the fleet the model is projected onto.
	Target Fleet
	// Notes are what a reader should know of the run (a fleet that came up short).
	Notes []string
	// Problems are what went wrong (requests that did not succeed in the window).
	Problems []string
}

// Markdown renders the report: the sizes side by side, the CPU per request of each
// tier, the fitted model and its projection.
func (r Report) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Scale-out of %s on %s: %s; load average %s at the start, %s at the end. Temporal: %s.\n\n",
		r.Date.UTC().Format(time.DateOnly), r.Date.UTC().Format("15:04 MST"), r.Machine, r.LoadBefore, r.LoadAfter, r.Temporal)
	b.WriteString("On 2 shared cores every process competes for the same CPUs: these figures mostly measure contention, not capacity.\n\n")
	b.WriteString(r.sizesTable())
	b.WriteString("\n" + r.cpuTable())
	b.WriteString("\n" + r.modelTable())
	if len(r.Notes) > 0 {
		b.WriteString("\nNotes:\n\n")
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "- %s\n", n)
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

func (r Report) sizesTable() string {
	var b strings.Builder
	b.WriteString("| replicas | thorax | agents | requests | succeeded | drain | requests/s | wasted claims (lost/attempted) | p50 | p99 | peak PG conns mantis / temporal / other |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range r.Sizes {
		fmt.Fprintf(&b, "| %d | %d | %d | %d | %d | %s | %.1f | %.2f%% (%.0f/%.0f) | %s | %s | %d / %d / %d |\n",
			s.Replicas, s.Thoraxes, s.Agents, s.Requests, s.Succeeded, s.Drain.Round(10*time.Millisecond), s.Throughput(),
			100*s.Wasted(), s.Claims.Lost, s.Claims.Won+s.Claims.Lost, s.P50.Round(time.Millisecond), s.P99.Round(time.Millisecond),
			s.PeakConns[ConnMantis], s.PeakConns[ConnTemporal], s.PeakConns[ConnOther])
	}
	return b.String()
}

// cpuTable shows, per tier and size, the CPU milliseconds per request during the
// load, the marginal part of it, and the idle rate.
func (r Report) cpuTable() string {
	var b strings.Builder
	b.WriteString("CPU per succeeded request, ms (gross over the load window / marginal, i.e. without the idle rate over the same window), and idle CPU in cores:\n\n| tier |")
	for _, s := range r.Sizes {
		fmt.Fprintf(&b, " %d replica(s) |", s.Replicas)
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(r.Sizes)) + "\n")
	for _, t := range Tiers {
		fmt.Fprintf(&b, "| %s |", t)
		for _, s := range r.Sizes {
			fmt.Fprintf(&b, " %.2f / %.2f, idle %.3f |", 1000*s.PerRequest(t), 1000*s.MarginalPerRequest(t), s.IdleRate(t))
		}
		b.WriteString("\n")
	}
	b.WriteString("| **all but the harness** |")
	for _, s := range r.Sizes {
		var gross float64
		for _, t := range Tiers {
			if t != TierHarness {
				gross += s.PerRequest(t)
			}
		}
		fmt.Fprintf(&b, " %.2f |", 1000*gross)
	}
	b.WriteString("\n")
	return b.String()
}

func (r Report) modelTable() string {
	var b strings.Builder
	b.WriteString("Model: marginal CPU ms per request = base + per-replica·(replicas−1) (least squares over the sizes; slope only for Mandible, PostgreSQL and Temporal, clamped at 0), idle CPU per process in millicores:\n\n")
	fmt.Fprintf(&b, "| tier | base ms/request | contention ms/request per extra replica | idle millicores per process | cores for %d replicas, %d Thorax, %d agents at %.0f requests/s |\n|---|---|---|---|---|\n",
		r.Target.Replicas, r.Target.Thoraxes, r.Target.Agents, r.Target.Rate)
	cores := r.Model.Cores(r.Target)
	tiers := slices.DeleteFunc(slices.Clone(Tiers), func(t Tier) bool { return t == TierHarness })
	var total float64
	for _, t := range tiers {
		tm := r.Model[t]
		total += cores[t]
		fmt.Fprintf(&b, "| %s | %.3f | %.3f | %.1f | %.1f |\n", t, 1000*tm.PerRequest.Base, 1000*tm.PerRequest.PerReplica, 1000*tm.IdlePerProcess, cores[t])
	}
	fmt.Fprintf(&b, "| **total** | | | | %.1f |\n", total)
	return b.String()
}

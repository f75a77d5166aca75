package main

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/mantis-deploy/mantis/internal/apiclient"
	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/contract/events"
	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/internal/safetext"
)

// stepProgress counts a step's targets while watching.
type stepProgress struct {
	name                                      string
	status                                    string
	total, queued, running, succeeded, failed int
}

// line renders the step with a bar of barWidth characters.
func (p stepProgress) line(barWidth int) string {
	done := p.succeeded + p.failed
	bar := ""
	if p.total > 0 {
		ok := p.succeeded * barWidth / p.total
		bad := p.failed * barWidth / p.total
		run := p.running * barWidth / p.total
		bar = strings.Repeat("#", ok) + strings.Repeat("x", bad) + strings.Repeat(">", run)
		bar += strings.Repeat(".", max(barWidth-len(bar), 0))
	}
	return fmt.Sprintf("%-20s [%s] %d/%d done  %d failed  %d running  %s",
		safetext.Terminal(p.name), bar, done, p.total, p.failed, p.running, p.status)
}

// Bounds of a step's progress bar, in characters: the widest, on a pipe or a wide
// terminal, and the narrowest before the line is cut instead.
const (
	progressBarWidth    = 30
	minProgressBarWidth = 10
)

// fitLine renders the step to fit a terminal of width columns: the bar shrinks
// first, then the line is cut with an ellipsis.
func (p stepProgress) fitLine(width int) string {
	rest := utf8.RuneCountInString(p.line(0))
	bar := min(max(width-1-rest, minProgressBarWidth), progressBarWidth)
	return fitWidth(p.line(bar), width)
}

// watch is the progress of one watched deployment, drawn as one line per step. On a
// terminal the step lines are redrawn in place; elsewhere (a pipe, a log) a step's
// line is printed again whenever it changes.
type watch struct {
	out    io.Writer
	format outputFormat
	tty    bool
	// width is the terminal's width in columns, when tty.
	width     int
	steps     []*stepProgress
	lastLines map[int]string
	drawn     int
	// lines prints live output when it is followed; nil otherwise.
	lines *outputLines
}

func newWatch(out io.Writer, d api.Deployment, format outputFormat) *watch {
	w := &watch{out: out, format: format, tty: isTerminal(out), lastLines: map[int]string{}}
	if w.tty {
		w.width = terminalWidth(out)
	}
	w.steps = make([]*stepProgress, len(d.Steps))
	for i, s := range d.Steps {
		w.steps[i] = &stepProgress{name: s.Name, status: s.Status, total: len(s.Targets)}
	}
	return w
}

func (w *watch) render() {
	if w.tty {
		if w.drawn > 0 {
			fmt.Fprintf(w.out, "\x1b[%dA", w.drawn)
		}
		for _, p := range w.steps {
			fmt.Fprintf(w.out, "\x1b[2K%s\n", p.fitLine(w.width))
		}
		w.drawn = len(w.steps)
		return
	}
	for i, p := range w.steps {
		if l := p.line(progressBarWidth); l != w.lastLines[i] {
			w.lastLines[i] = l
			fmt.Fprintln(w.out, l)
		}
	}
}

// step is the progress of the step at pos, named name when name is set. A deployment
// just created has no steps recorded yet: they appear with their first events.
func (w *watch) step(pos *int, name string) *stepProgress {
	if pos == nil || *pos < 0 || *pos >= maxWatchedSteps {
		return nil
	}
	for len(w.steps) <= *pos {
		w.steps = append(w.steps, &stepProgress{name: fmt.Sprintf("step %d", len(w.steps)), status: domain.StepPending})
	}
	p := w.steps[*pos]
	if name != "" {
		p.name = name
	}
	return p
}

// apply counts ev into the progress. It returns the deployment's final state and true
// when ev ends the deployment.
func (w *watch) apply(ev apiclient.Event) (string, bool) {
	switch t := ev.Type; {
	case t == events.StepStarted:
		d := decode[events.StepStartedData](ev)
		if p := w.step(&d.StepPosition, d.Step); p != nil {
			p.status, p.total = domain.StepRunning, d.Targets
		}
	case t.IsStep():
		d := decode[events.StepEndedData](ev)
		if p := w.step(&d.StepPosition, d.Step); p != nil {
			p.status = t.What()
		}
	case t == events.TargetQueued:
		d := decode[events.TargetQueuedData](ev)
		if p := w.step(&d.StepPosition, ""); p != nil {
			p.queued++
		}
	case t == events.TargetRunning:
		if p := w.step(decode[events.TargetRunningData](ev).StepPosition, ""); p != nil {
			p.running++
			p.queued = max(p.queued-1, 0)
		}
	case t == events.TargetSucceeded || t == events.TargetFailed:
		if p := w.step(decode[events.TargetEndedData](ev).StepPosition, ""); p != nil {
			if t == events.TargetSucceeded {
				p.succeeded++
			} else {
				p.failed++
			}
			p.running = max(p.running-1, 0)
		}
	case t.IsDeployment() && terminal(t.What()):
		return t.What(), true
	}
	return "", false
}

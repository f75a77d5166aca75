package main

import (
	"context"

	"github.com/mantis-deploy/mantis/internal/apiclient"
	"github.com/mantis-deploy/mantis/internal/contract/events"
)

// followOutput makes w print the target.output events it sees, as prefixed lines
// between its progress lines (watch --follow-output).
func (w *watch) followOutput() { w.lines = newOutputLines(w.out) }

// handleSide handles the events that are not progress: target.output, printed when
// following output, and reset, after which the progress is reloaded from the
// deployment as it is now. It reports whether ev was one of them; a failed reload is
// returned.
func (w *watch) handleSide(ctx context.Context, c *apiclient.Client, id string, ev apiclient.Event) (bool, error) {
	switch ev.Type {
	case events.TargetOutput:
		if w.lines != nil && w.format == outputText {
			d := decode[events.TargetOutputData](ev)
			w.lines.add(d.CommandID, d.Target, d.Seq, d.Data)
			w.drawn = 0 // the progress is drawn again below the output
			w.lastLines = map[int]string{}
		}
		return true, nil
	case events.Reset:
		d, _, err := c.Deployment(ctx, id)
		if err != nil {
			return true, err
		}
		fresh := newWatch(w.out, d, w.format)
		w.steps = fresh.steps
		w.lastLines = map[int]string{}
		return true, nil
	}
	return false, nil
}

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"strconv"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/mantis-deploy/mantis/internal/apiclient"
	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/contract/events"
	"github.com/mantis-deploy/mantis/internal/safetext"
)

// maxOutputLine bounds a line held back while its end has not arrived: a longer one is
// printed in parts.
const maxOutputLine = 64 << 10

// logsPageLimit is the page size logs asks the output route for.
const logsPageLimit = 200

// targetNamePattern is what --target may hold: a target name.
var targetNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// logsOptions says which output to print.
type logsOptions struct {
	target string
	step   int // -1: every step
	follow bool
}

func newLogsCommand(f *clientFlags) *cobra.Command {
	o := logsOptions{step: -1}
	cmd := &cobra.Command{
		Use:   "logs ID",
		Short: "Print a deployment's live output, each line prefixed with its target's name",
		Long: `logs prints the output the deployment's commands streamed while they ran, each line as
"<target> | <line>", in the order Mandible stored it. --target and --step (the step's
0-based position) narrow it. -f follows the deployment's event stream and prints output
as it is written, until the deployment ends; when the stream says events were pruned
(reset), logs reloads the stored output and goes on. Live output is best effort and
bounded per command: "mantisctl get" shows each result's own output tail.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeDeploymentIDs(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := uuid.Parse(args[0]); err != nil {
				return usageError{err: fmt.Errorf("ID %q: must be a deployment UUID", args[0])}
			}
			if o.target != "" && !targetNamePattern.MatchString(o.target) {
				return usageError{err: fmt.Errorf("--target %q: not a target name", o.target)}
			}
			c, err := f.client()
			if err != nil {
				return err
			}
			return printLogs(cmd.Context(), cmd.OutOrStdout(), c, args[0], o)
		},
	}
	cmd.Flags().StringVar(&o.target, "target", "", "only this target's output")
	cmd.Flags().IntVar(&o.step, "step", -1, "only this step's output (its 0-based position; -1: every step)")
	cmd.Flags().BoolVarP(&o.follow, "follow", "f", false, "follow the output as it is written, until the deployment ends")
	return cmd
}

// printLogs prints the stored output, then, with follow, what the stream brings.
func printLogs(ctx context.Context, out io.Writer, c *apiclient.Client, id string, o logsOptions) error {
	lines := newOutputLines(out)
	defer lines.flush()
	if err := loadOutput(ctx, c, id, o, lines); err != nil {
		return err
	}
	if !o.follow {
		return nil
	}
	q := url.Values{"type": {string(events.TargetOutput) + ",deployment.*"}, "last_event_id": {"0"}}
	var loadErr error
	err := c.StreamEvents(ctx, "/sse/deployments/"+id+"?"+q.Encode(), func(ev apiclient.Event) bool {
		switch {
		case ev.Type == events.Reset:
			loadErr = loadOutput(ctx, c, id, o, lines)
			return loadErr == nil
		case ev.Type == events.TargetOutput:
			if d := decode[events.TargetOutputData](ev); o.wants(d.Target, d.Step) {
				lines.add(d.CommandID, d.Target, d.Seq, d.Data)
			}
		case ev.Type.IsDeployment() && terminal(ev.Type.What()):
			return false
		}
		return true
	})
	if loadErr != nil {
		return loadErr
	}
	return err
}

// wants reports whether output of target in step is asked for.
func (o logsOptions) wants(target string, step *int) bool {
	if o.target != "" && target != o.target {
		return false
	}
	return o.step < 0 || (step != nil && *step == o.step)
}

// loadOutput prints every stored chunk lines has not printed yet, page by page.
func loadOutput(ctx context.Context, c *apiclient.Client, id string, o logsOptions, lines *outputLines) error {
	q := url.Values{"limit": {strconv.Itoa(logsPageLimit)}}
	if o.target != "" {
		q.Set("target", o.target)
	}
	if o.step >= 0 {
		q.Set("step", strconv.Itoa(o.step))
	}
	path := "/api/v1/deployments/" + id + "/output?" + q.Encode()
	for path != "" {
		var page api.OutputPage
		if err := c.Do(ctx, "GET", path, nil, &page); err != nil {
			return fmt.Errorf("reading the output of deployment %s: %w", id, err)
		}
		for _, ch := range page.Chunks {
			lines.add(ch.CommandID, ch.Target, ch.Seq, ch.Data)
		}
		path = page.Next
	}
	return nil
}

// outputLines prints chunks of many commands as whole lines, each prefixed with its
// target's name, and prints each command's chunk once whatever the order and the
// number of times it arrives (a reload after a reset, a replayed stream).
type outputLines struct {
	out     io.Writer
	printed map[uuid.UUID]int64 // the next seq expected per command
	partial map[uuid.UUID]*partialLine
	order   []uuid.UUID // commands with a partial line, in the order they began
}

// partialLine is a command's output since its last newline.
type partialLine struct {
	target string
	buf    []byte
}

func newOutputLines(out io.Writer) *outputLines {
	return &outputLines{out: out, printed: map[uuid.UUID]int64{}, partial: map[uuid.UUID]*partialLine{}}
}

// add prints the complete lines of a chunk; a chunk printed before, or not the next
// of its command, is skipped (live output is best effort: a gap stays a gap).
func (l *outputLines) add(command uuid.UUID, target string, seq int64, data []byte) {
	if next, seen := l.printed[command]; seen && seq < next {
		return
	}
	l.printed[command] = seq + 1
	p := l.partial[command]
	if p == nil {
		p = &partialLine{target: target}
		l.partial[command] = p
		l.order = append(l.order, command)
	}
	p.buf = append(p.buf, data...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 && len(p.buf) < maxOutputLine {
			return
		}
		if i < 0 {
			i = len(p.buf) - 1
		}
		l.printLine(target, p.buf[:i+1])
		p.buf = p.buf[i+1:]
	}
}

// printLine prints one line with its prefix, as terminal-safe text.
func (l *outputLines) printLine(target string, line []byte) {
	text := safetext.Terminal(string(bytes.TrimSuffix(line, []byte("\n"))))
	fmt.Fprintf(l.out, "%s | %s\n", target, text)
}

// flush prints the lines whose end never came.
func (l *outputLines) flush() {
	for _, id := range l.order {
		if p := l.partial[id]; p != nil && len(p.buf) > 0 {
			l.printLine(p.target, p.buf)
			p.buf = nil
		}
	}
}

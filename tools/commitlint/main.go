// Command commitlint checks the messages of the commits after a base commit, as
// `make lint` runs it: a subject `area: imperative summary` of at most 72 characters
// that does not end with a period, a blank line after it, and body lines of at most
// 72 characters unless they hold no space (a URL). Merge commits are exempt. The base
// is the commit the rule started from (COMMITLINT_BASE in the Makefile): the history
// before it predates the rule. A base this clone does not hold, or one that is not an
// ancestor of the checked commit, fails the check rather than passing it unchecked.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
)

func main() {
	base := flag.String("base", "", "the last commit not checked (COMMITLINT_BASE); required")
	head := flag.String("head", "HEAD", "the last commit checked")
	dir := flag.String("C", ".", "the repository")
	flag.Parse()
	if *base == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: commitlint -base COMMIT [-head HEAD] [-C DIR]")
		os.Exit(2)
	}
	if err := run(gitIn(*dir), *base, *head, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "commitlint:", err)
		os.Exit(1)
	}
}

// errBadMessages says that some commits were printed with their problems.
var errBadMessages = errors.New("commit messages do not follow CONTRIBUTING.md (\"Commits\")")

// run checks every commit of base..head and prints each one with problems.
func run(git gitRunner, base, head string, w io.Writer) error {
	if err := checkRange(git, base, head); err != nil {
		return err
	}
	cs, err := commitsAfter(git, base, head)
	if err != nil {
		return err
	}
	bad := 0
	for _, c := range cs {
		if c.merge() {
			continue
		}
		problems := messageProblems(c.message)
		if len(problems) == 0 {
			continue
		}
		bad++
		fmt.Fprintf(w, "%s %s\n", short(c.hash), firstLine(c.message))
		for _, p := range problems {
			fmt.Fprintf(w, "    - %s\n", p)
		}
	}
	fmt.Fprintf(w, "commitlint: %d commits after %s checked, %d with problems\n", len(cs), short(base), bad)
	if bad > 0 {
		return errBadMessages
	}
	return nil
}

// checkRange fails when base is missing from the clone or is not an ancestor of head:
// either would leave commits unchecked without saying so.
func checkRange(git gitRunner, base, head string) error {
	if _, err := git("rev-parse", "--verify", "--quiet", head+"^{commit}"); err != nil {
		return fmt.Errorf("%s is not a commit of this repository", head)
	}
	if _, err := git("rev-parse", "--verify", "--quiet", base+"^{commit}"); err != nil {
		why := "set COMMITLINT_BASE to a commit of this history"
		if out, err := git("rev-parse", "--is-shallow-repository"); err == nil && strings.TrimSpace(out) == "true" {
			why = "this clone is shallow: run `git fetch --unshallow`, or clone without --depth"
		}
		return fmt.Errorf("base commit %s is not in this repository: %s", base, why)
	}
	if _, err := git("merge-base", "--is-ancestor", base, head); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) && exit.ExitCode() == 1 {
			return fmt.Errorf("base commit %s is not an ancestor of %s: the history was rewritten past it, or %s does not contain it; set COMMITLINT_BASE", short(base), head, head)
		}
		return fmt.Errorf("checking that %s is an ancestor of %s: %w", short(base), head, err)
	}
	return nil
}

// commit is one commit of the checked range.
type commit struct {
	hash    string
	parents []string
	message string
}

// merge reports whether c is a merge commit, which the rules exempt.
func (c commit) merge() bool { return len(c.parents) > 1 }

// commitsAfter lists the commits of base..head, newest first.
func commitsAfter(git gitRunner, base, head string) ([]commit, error) {
	out, err := git("log", "-z", "--format=%H %P%n%B", base+".."+head)
	if err != nil {
		return nil, fmt.Errorf("listing the commits after %s: %w", short(base), err)
	}
	var cs []commit
	for _, rec := range strings.Split(out, "\x00") {
		if rec == "" {
			continue
		}
		ids, message, _ := strings.Cut(rec, "\n")
		fields := strings.Fields(ids)
		if len(fields) == 0 {
			return nil, fmt.Errorf("reading git log: a record without a hash: %q", rec)
		}
		cs = append(cs, commit{hash: fields[0], parents: fields[1:], message: message})
	}
	return cs, nil
}

// gitRunner runs git with args and returns its standard output.
type gitRunner func(args ...string) (string, error)

// gitIn runs git in dir.
func gitIn(dir string) gitRunner {
	return func(args ...string) (string, error) {
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			if msg := strings.TrimSpace(stderr.String()); msg != "" {
				return stdout.String(), fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, msg)
			}
			return stdout.String(), fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
		}
		return stdout.String(), nil
	}
}

func short(hash string) string {
	if len(hash) > 12 {
		return hash[:12]
	}
	return hash
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

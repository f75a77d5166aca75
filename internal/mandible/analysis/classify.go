// Package analysis explains failed commands. A rule-based classifier names the cause
// of a failure in one line with a suggested fix; an optional OpenAI-compatible model
// endpoint refines the summary; a Processor works through the queued rows of the
// analyses table (failed commands, queued by StoreCommandResult, and external requests)
// and reports each deployment command's analysis as a target.analysis event; Consume
// stores the requests external publishers send on mantis.analysis.requests.
package analysis

import (
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Categories of failure.
const (
	CategoryPermissionDenied   = "permission_denied"
	CategoryCommandNotFound    = "command_not_found"
	CategoryNetworkUnreachable = "network_unreachable"
	CategoryDiskFull           = "disk_full"
	CategoryOutOfMemory        = "out_of_memory"
	CategoryTimeout            = "timeout"
	CategoryAuthentication     = "authentication"
	CategoryMissingDependency  = "missing_dependency"
	CategoryFileNotFound       = "file_not_found"
	CategorySyntaxError        = "syntax_error"
	CategoryUnknown            = "unknown"
)

// Result is the explanation of one failure.
type Result struct {
	Category string `json:"category"`
	// Summary is one line naming the cause, quoting the offending token when there is
	// one (`command not found: kubectl`).
	Summary    string `json:"summary"`
	Suggestion string `json:"suggestion"`
	// Rule names the rule that matched (category.variant), for tests and debugging.
	Rule string `json:"rule"`
	// RefinedBy names what wrote the summary: RefinedByRules, or "model:<name>".
	RefinedBy string `json:"refined_by"`
	// Error says why a configured refinement did not happen; the rules' summary stands.
	Error string `json:"error,omitempty"`
}

// RefinedByRules is the refined_by of a result whose summary the rules wrote.
const RefinedByRules = "rules"

// Classify explains a failed command from its output, exit code and whether it was
// killed for running past its timeout. Rules are tried in order of how decisive their
// evidence is (a timeout or an out-of-memory kill ends a run whatever it printed
// before), and within a rule the last matching line wins, since a failing command
// reports its fatal error last. Output that matches nothing is "unknown", quoting the
// last non-empty line.
func Classify(output string, exitCode int, timedOut bool) Result {
	lines := splitLines(output)
	if timedOut {
		return timeoutResult(lines)
	}
	lower := make([]string, len(lines))
	for i, l := range lines {
		lower[i] = strings.ToLower(l)
	}
	for _, r := range rules {
		if res, ok := r.match(lines, lower); ok {
			return res
		}
		if r.exitCode != 0 && r.exitCode == exitCode {
			return r.exitResult()
		}
	}
	for _, r := range exitRules {
		if r.exitCode == exitCode {
			return r.exitResult()
		}
	}
	return unknownResult(lines, exitCode)
}

// pattern is one way a failure shows in a line of output.
type pattern struct {
	// name tells the variants of a category apart in Result.Rule.
	name string
	re   *regexp.Regexp
	// label starts the summary; the offending token follows it.
	label string
	// suggestion, when set, replaces the rule's.
	suggestion string
}

// rule is one category: its patterns in order of preference, how to find the
// offending token when a pattern does not capture it, and the suggested fix.
type rule struct {
	category string
	// keywords are lower-case words of which every pattern needs one: a line without
	// any is not worth the patterns (case-insensitive expressions are slow in Go).
	keywords []string
	patterns []pattern
	// token finds the offending token in a matched line when the pattern captured none;
	// at is where the match starts.
	token func(line string, at int) string
	// suggestion is the fix; {token} stands for the offending token, or noun without one.
	suggestion string
	noun       string
	// exitCode, when set, is an exit code that is evidence for this category on its own.
	exitCode  int
	exitLabel string
}

// match finds the rule's last matching line; lower holds the lines in lower case.
func (r rule) match(lines, lower []string) (Result, bool) {
	for i := len(lines) - 1; i >= 0; i-- {
		if !containsAny(lower[i], r.keywords) {
			continue
		}
		line := lines[i]
		for _, p := range r.patterns {
			m := p.re.FindStringSubmatchIndex(line)
			if m == nil {
				continue
			}
			tok := ""
			for g := 2; g+1 < len(m); g += 2 {
				if m[g] >= 0 && m[g+1] > m[g] {
					tok = line[m[g]:m[g+1]]
					break
				}
			}
			if tok == "" && r.token != nil {
				tok = r.token(line, m[0])
			}
			tok = cleanToken(tok)
			summary := p.label + ": " + tok
			if tok == "" {
				summary = p.label + `: "` + excerpt(line) + `"`
			}
			suggestion := r.suggestion
			if p.suggestion != "" {
				suggestion = p.suggestion
			}
			return Result{
				Category:   r.category,
				Summary:    summary,
				Suggestion: fill(suggestion, tok, r.noun),
				Rule:       r.category + "." + p.name,
				RefinedBy:  RefinedByRules,
			}, true
		}
	}
	return Result{}, false
}

func containsAny(s string, words []string) bool {
	for _, w := range words {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

func (r rule) exitResult() Result {
	return Result{
		Category:   r.category,
		Summary:    r.exitLabel,
		Suggestion: fill(r.suggestion, "", r.noun),
		Rule:       r.category + ".exit_" + strconv.Itoa(r.exitCode),
		RefinedBy:  RefinedByRules,
	}
}

func fill(suggestion, token, noun string) string {
	if token == "" {
		token = noun
	}
	return strings.ReplaceAll(suggestion, "{token}", token)
}

func timeoutResult(lines []string) Result {
	// StoreCommandResult appends "timed out" to the output it queues: the command's own
	// last line is the one before.
	if n := len(lines); n > 0 {
		for n > 0 && strings.TrimSpace(lines[n-1]) == "" {
			n--
		}
		if n > 0 && strings.EqualFold(strings.TrimSpace(lines[n-1]), "timed out") {
			lines = lines[:n-1]
		}
	}
	summary := "command timed out"
	if last := lastLine(lines); last != "" {
		summary += `; last output: "` + excerpt(last) + `"`
	}
	return Result{
		Category: CategoryTimeout,
		Summary:  summary,
		Suggestion: "Raise the step's timeout if the work is legitimately slow; otherwise find what it waits on " +
			"(a lock, an unreachable host, a prompt for input: commands run without a terminal) in its last output.",
		Rule:      CategoryTimeout + ".killed",
		RefinedBy: RefinedByRules,
	}
}

func unknownResult(lines []string, exitCode int) Result {
	prefix := "failed"
	if exitCode != 0 {
		prefix = "exit code " + strconv.Itoa(exitCode)
	}
	summary := prefix + " with no output"
	if last := lastLine(lines); last != "" {
		summary = prefix + `: "` + excerpt(last) + `"`
	}
	return Result{
		Category:   CategoryUnknown,
		Summary:    summary,
		Suggestion: "No known failure pattern matched: read the command's full output in the target's result.",
		Rule:       CategoryUnknown,
		RefinedBy:  RefinedByRules,
	}
}

// ansiEscape matches terminal colour and cursor sequences, which tools print even
// without a terminal.
var ansiEscape = regexp.MustCompile(`\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07`)

// maxLines is how many of the output's last lines the rules read: a failing command
// reports its fatal error last, and the bound keeps a flood of short lines cheap.
const maxLines = 2000

// splitLines returns the output's last maxLines lines without escape sequences. A
// carriage return inside a line stays: a progress bar redraws itself with one, and a
// script with Windows line endings shows one before ": bad interpreter".
func splitLines(output string) []string {
	output = ansiEscape.ReplaceAllString(output, "")
	lines := strings.Split(output, "\n")
	if len(lines) > maxLines {
		lines = lines[len(lines)-maxLines:]
	}
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, "\r")
	}
	return lines
}

func lastLine(lines []string) string {
	for i := len(lines) - 1; i >= 0; i-- {
		if s := strings.TrimSpace(lines[i]); s != "" {
			return s
		}
	}
	return ""
}

// maxExcerpt bounds a quoted line in a summary, in runes.
const maxExcerpt = 160

// excerpt is a line fit for a one-line summary: trimmed, inner runs of blanks
// collapsed, cut at maxExcerpt runes.
func excerpt(line string) string {
	// Of a line a progress bar redrew, the last drawing is what a terminal showed.
	if i := strings.LastIndex(strings.TrimRight(line, "\r "), "\r"); i >= 0 {
		line = line[i+1:]
	}
	s := strings.Join(strings.Fields(line), " ")
	return truncate(s, maxExcerpt)
}

func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// cleanToken trims the quoting and punctuation around a token, unless that is all
// there is to it (bash's "unexpected token `)'").
func cleanToken(tok string) string {
	tok = strings.TrimSpace(tok)
	if t := strings.TrimRight(strings.Trim(tok, "'\"`‘’“”()[]<>,;"), ".:"); t != "" {
		tok = t
	}
	return truncate(strings.Join(strings.Fields(tok), " "), 100)
}

// quoted finds a quoted string; quotedAtEnd one that ends its text.
var (
	quoted      = regexp.MustCompile("'([^']+)'|\"([^\"]+)\"|`([^'`]+)'|‘([^’]+)’")
	quotedAtEnd = regexp.MustCompile("(?:'([^']+)'|\"([^\"]+)\"|`([^'`]+)'|‘([^’]+)’)$")
)

func firstGroup(m []string) string {
	for _, g := range m[1:] {
		if g != "" {
			return g
		}
	}
	return ""
}

// subjectBefore finds what a message of the form "prog: subject: message" is about:
// the last quoted name before at, else a path-like word of the last field, else that
// field when it is one word after a program's name. "mkdir: cannot create directory
// '/srv/app': Permission denied" is about /srv/app, "open /etc/app.yml: permission
// denied" about /etc/app.yml, "cat: config: No such file or directory" about config.
func subjectBefore(line string, at int) string {
	head := strings.TrimRight(line[:at], " :,-(")
	// A quoted name right before the message is what it is about, spaces and all.
	if m := quotedAtEnd.FindStringSubmatch(head); m != nil {
		return firstGroup(m)
	}
	fields := strings.Split(head, ": ")
	last := strings.TrimSpace(fields[len(fields)-1])
	words := strings.Fields(last)
	for i := len(words) - 1; i >= 0; i-- {
		if strings.ContainsAny(words[i], "/\\") {
			return words[i]
		}
	}
	if ms := quoted.FindAllStringSubmatch(last, -1); ms != nil {
		return firstGroup(ms[len(ms)-1])
	}
	if len(words) != 1 {
		return ""
	}
	if (len(fields) >= 2 && !genericPrefix[strings.ToLower(words[0])]) || strings.ContainsAny(words[0], ".@~_") {
		return words[0]
	}
	return ""
}

// genericPrefix are words that start a message without naming its subject.
var genericPrefix = map[string]bool{"error": true, "fatal": true, "warning": true, "panic": true, "e": true, "w": true, "err": true}

var (
	hostPortPatterns = []*regexp.Regexp{
		regexp.MustCompile(`(?i)\b(?:to|host)\s+([\w.-]+)\s+port\s+(\d{1,5})\b`),
		regexp.MustCompile(`(?i)server at "([^"]+)"[^,]*, port (\d{1,5})`),
		regexp.MustCompile(`((?:[A-Za-z0-9-]+\.)+[A-Za-z0-9-]+|localhost|\[[0-9a-fA-F:]+\]):(\d{1,5})\b`),
	}
	urlHost = regexp.MustCompile(`(?i)\b[a-z][a-z0-9+.-]*://(?:[^@/\s]+@)?([^/\s:'"]+)`)
	ipAddr  = regexp.MustCompile(`\b(\d{1,3}(?:\.\d{1,3}){3})\b`)
	anyURL  = regexp.MustCompile(`(?i)\bhttps?://[^\s'"]+`)
)

// hostIn finds the host (and port) a network error is about.
func hostIn(line string, _ int) string {
	for _, re := range hostPortPatterns {
		if m := re.FindStringSubmatch(line); m != nil {
			return m[1] + ":" + m[2]
		}
	}
	if m := urlHost.FindStringSubmatch(line); m != nil {
		return m[1]
	}
	if m := ipAddr.FindStringSubmatch(line); m != nil {
		return m[1]
	}
	return ""
}

// urlIn finds the URL an HTTP error is about.
func urlIn(line string, _ int) string { return anyURL.FindString(line) }

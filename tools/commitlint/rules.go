package main

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// maxColumns bounds a subject and each line of a body, so that `git log` reads in an
// 80-column terminal with its indent.
const maxColumns = 72

// subjectPattern is `area: summary`: the area lower-case letters and digits, and `/`,
// `-`, `.`, `,` and `_` for paths and lists of areas (`workflows`, `tools/commitlint`,
// `httpapi,grpcapi`), then a colon, one space and the summary.
var subjectPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9/.,_-]*: [^ ]`)

// messageProblems lists what is wrong with one commit message, each as a sentence
// that says what the rule wants.
func messageProblems(message string) []string {
	lines := strings.Split(strings.TrimRight(message, "\n"), "\n")
	subject := lines[0]
	problems := subjectProblems(subject)
	if len(lines) > 1 && strings.TrimSpace(lines[1]) != "" {
		problems = append(problems, "the second line is not blank: a blank line separates the subject from the body")
	}
	for i, line := range lines[1:] {
		if n := utf8.RuneCountInString(line); n > maxColumns && strings.Contains(strings.TrimSpace(line), " ") {
			problems = append(problems, fmt.Sprintf("body line %d is %d characters, over %d: wrap it (only a line without spaces, a URL, may be longer)", i+2, n, maxColumns))
		}
	}
	return problems
}

// subjectProblems lists what is wrong with a subject line.
func subjectProblems(subject string) []string {
	if strings.TrimSpace(subject) == "" {
		return []string{"the subject is empty"}
	}
	var problems []string
	if n := utf8.RuneCountInString(subject); n > maxColumns {
		problems = append(problems, fmt.Sprintf("the subject is %d characters, over %d", n, maxColumns))
	}
	if !subjectPattern.MatchString(subject) {
		problems = append(problems, "the subject does not start with `area: ` (a lower-case part of the tree, a colon, one space)")
	}
	if strings.HasSuffix(subject, ".") {
		problems = append(problems, "the subject ends with a period")
	}
	if subject != strings.TrimRight(subject, " \t") {
		problems = append(problems, "the subject ends with white space")
	}
	return problems
}

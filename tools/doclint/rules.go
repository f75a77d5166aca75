package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

const (
	maxReadmeLines = 200
	indexPage      = "docs/README.md"
	// allowMark at the end of a line lets it carry what the evidence rules refuse, for
	// the rare page that must show a date or a hash as an example.
	allowMark = "<!-- doclint:allow -->"
)

// finding is one broken rule, at a line of a file (line 0: the file as a whole).
type finding struct {
	file string
	line int
	msg  string
}

func (f finding) String() string {
	if f.line == 0 {
		return fmt.Sprintf("%s: %s", f.file, f.msg)
	}
	return fmt.Sprintf("%s:%d: %s", f.file, f.line, f.msg)
}

// evidence is what a page meant to stay true must not carry: figures of one run belong
// in bench/results/, and the words about how the project is made belong nowhere.
var evidence = []struct {
	re  *regexp.Regexp
	msg string
}{
	{regexp.MustCompile(`\b(19|20)\d\d-[01]\d-[0-3]\d\b`), "a date: measurements go in bench/results/"},
	{regexp.MustCompile(`(?i)\bload(\s*av(era)?ge?s?)?\s*(was|of|at|is|:|=)?\s*\d+\.\d+|\bloadavg\b`), "a load average: measurements go in bench/results/"},
	{regexp.MustCompile(`(?i)\bseed(s|'s)?\b`), `"seed": name the product's own terms`},
	{regexp.MustCompile(`(?i)\bnot kept\b`), `"not kept": describe what is, not what was tried`},
}

// hexWord is a candidate commit hash; isHash keeps those with both a digit and a
// letter that are not part of a UUID or a longer identifier.
var hexWord = regexp.MustCompile(`\b[0-9a-f]{7,40}\b`)

func isHash(line string, loc []int) bool {
	w := line[loc[0]:loc[1]]
	if !strings.ContainsAny(w, "0123456789") || !strings.ContainsAny(w, "abcdef") {
		return false
	}
	before, after := byte(' '), byte(' ')
	if loc[0] > 0 {
		before = line[loc[0]-1]
	}
	if loc[1] < len(line) {
		after = line[loc[1]]
	}
	return before != '-' && after != '-' && before != '.' && before != '/'
}

// link matches the target of an inline Markdown link or image.
var link = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// lintTree checks the documentation under root.
func lintTree(root string) ([]finding, error) {
	pages, err := docPages(root)
	if err != nil {
		return nil, err
	}
	var out []finding
	for _, p := range append([]string{"README.md", "ARCHITECTURE.md"}, pages...) {
		fs, err := checkPage(root, p, true)
		if err != nil {
			return nil, err
		}
		out = append(out, fs...)
	}
	fs, err := checkPage(root, "CONTRIBUTING.md", false)
	if err != nil {
		return nil, err
	}
	out = append(out, fs...)
	out = append(out, checkReadmeLength(root)...)
	idx, err := checkIndex(root, pages)
	if err != nil {
		return nil, err
	}
	return append(out, idx...), nil
}

// docPages lists the Markdown pages under docs/, slash-separated and relative to root.
func docPages(root string) ([]string, error) {
	var pages []string
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			pages = append(pages, filepath.ToSlash(rel))
		}
		return nil
	})
	sort.Strings(pages)
	return pages, err
}

// checkPage checks the links of one page and, when strict, the evidence rules, code
// blocks included (pasted output is evidence too) but link targets left out (a dated
// results file may be linked by its name).
func checkPage(root, page string, strict bool) ([]finding, error) {
	b, err := os.ReadFile(filepath.Join(root, page))
	if err != nil {
		return nil, err
	}
	var out []finding
	fenced := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out = append(out, checkLinks(root, page, n, line)...)
		}
		if strict && !strings.HasSuffix(strings.TrimSpace(line), allowMark) {
			out = append(out, checkEvidence(page, n, link.ReplaceAllString(line, "]()"))...)
		}
	}
	return out, sc.Err()
}

func checkEvidence(page string, n int, line string) []finding {
	var out []finding
	for _, e := range evidence {
		if e.re.MatchString(line) {
			out = append(out, finding{page, n, e.msg})
		}
	}
	for _, loc := range hexWord.FindAllStringIndex(line, -1) {
		if isHash(line, loc) {
			out = append(out, finding{page, n, fmt.Sprintf("%q looks like a commit hash: measurements go in bench/results/", line[loc[0]:loc[1]])})
			break
		}
	}
	return out
}

func checkLinks(root, page string, n int, line string) []finding {
	var out []finding
	for _, m := range link.FindAllStringSubmatch(line, -1) {
		target, ok := localTarget(page, m[1])
		if !ok {
			continue
		}
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(target))); err != nil {
			out = append(out, finding{page, n, fmt.Sprintf("link to %s: no such file", m[1])})
		}
	}
	return out
}

// localTarget resolves a link of page to a path relative to the root, or reports
// false for links that leave the tree (a scheme) or stay on the page (an anchor).
func localTarget(page, target string) (string, bool) {
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") || strings.HasPrefix(target, "#") {
		return "", false
	}
	if i := strings.IndexAny(target, "#?"); i >= 0 {
		target = target[:i]
	}
	if strings.HasPrefix(target, "/") {
		return strings.TrimPrefix(target, "/"), true
	}
	return filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(page), target))), true
}

func checkReadmeLength(root string) []finding {
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		return []finding{{"README.md", 0, err.Error()}}
	}
	if n := bytes.Count(b, []byte("\n")); n > maxReadmeLines {
		return []finding{{"README.md", 0, fmt.Sprintf("%d lines: the landing page holds at most %d; move the rest into docs/", n, maxReadmeLines)}}
	}
	return nil
}

// checkIndex reports every page under docs/ the index does not link.
func checkIndex(root string, pages []string) ([]finding, error) {
	b, err := os.ReadFile(filepath.Join(root, indexPage))
	if err != nil {
		return nil, err
	}
	linked := map[string]bool{}
	for _, m := range link.FindAllStringSubmatch(string(b), -1) {
		if t, ok := localTarget(indexPage, m[1]); ok {
			linked[t] = true
		}
	}
	var out []finding
	for _, p := range pages {
		if p != indexPage && !linked[p] {
			out = append(out, finding{p, 0, "not linked from " + indexPage})
		}
	}
	return out, nil
}

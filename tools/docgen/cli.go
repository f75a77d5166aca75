package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// cliPage is the mantisctl reference: its exit codes, from the Exit* constants of
// cmd/mantisctl/exitcodes.go and their doc comments, then its command tree, which
// `mantisctl reference-markdown` prints.
func cliPage(root string) (string, error) {
	docs, err := parseDocs(filepath.Join(root, "cmd", "mantisctl"))
	if err != nil {
		return "", err
	}
	codes, err := exitCodeTable(docs)
	if err != nil {
		return "", err
	}
	tree, err := commandTree(root)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(generatedMarkdown)
	b.WriteString("# mantisctl reference\n\n" +
		"`mantisctl` submits, watches and inspects deployments through Mandible's HTTP API, and runs the " +
		"local stack (`mantisctl dev`). Every command and flag below is read from its command tree; " +
		"`mantisctl <command> --help` prints the same.\n\n")
	b.WriteString("## Exit codes\n\nA contract with the scripts and CI jobs that run `mantisctl`.\n\n")
	b.WriteString(codes)
	b.WriteString("\n")
	b.WriteString(tree)
	return b.String(), nil
}

// exitCodeTable is the table of the Exit* constants, by value, each with its doc
// comment past "ExitName: ".
func exitCodeTable(docs *goDocs) (string, error) {
	type row struct {
		code    int
		meaning string
	}
	var rows []row
	for name, doc := range docs.consts {
		if !strings.HasPrefix(name, "Exit") {
			continue
		}
		code, err := strconv.Atoi(docs.constValues[name])
		if err != nil {
			return "", fmt.Errorf("%s is not an integer literal", name)
		}
		meaning, ok := strings.CutPrefix(strings.TrimSpace(spaces.ReplaceAllString(doc, " ")), name+": ")
		if !ok {
			return "", fmt.Errorf("the doc comment of %s does not start with %q", name, name+": ")
		}
		rows = append(rows, row{code, meaning})
	}
	if len(rows) == 0 {
		return "", fmt.Errorf("no Exit* constants")
	}
	slices.SortFunc(rows, func(a, b row) int { return a.code - b.code })
	var b strings.Builder
	b.WriteString("| exit code | meaning |\n|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %d | %s |\n", r.code, cell(r.meaning))
	}
	return b.String(), nil
}

// commandTree runs `mantisctl reference-markdown` from the source, in an environment
// without the variables that change flag defaults or the client configuration found.
func commandTree(root string) (string, error) {
	cmd := exec.Command("go", "run", "./cmd/mantisctl", "reference-markdown")
	cmd.Dir = root
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "MANTIS_") || name == "XDG_CONFIG_HOME" || name == "COLUMNS" {
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("mantisctl reference-markdown: %w\n%s", err, stderr.String())
	}
	return string(out), nil
}

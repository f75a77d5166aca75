// Command doclint holds the documentation to the rules a reader relies on:
//
//   - README.md is a landing page of at most 200 lines;
//   - every page under docs/ is linked from the index, docs/README.md;
//   - every relative link of README.md, ARCHITECTURE.md, CONTRIBUTING.md and docs/
//     names a file or directory that exists;
//   - README.md, ARCHITECTURE.md and the pages under docs/ carry no run evidence
//     (commit hashes, dates, load averages) and no words about how the project is
//     made rather than what it does. Measurements live in the dated results files
//     of bench/results/, which are not checked.
//
// It prints one line per finding, file:line: message, and exits 1 when there is any.
//
//	go run ./tools/doclint [dir]
package main

import (
	"fmt"
	"os"
)

func main() {
	root := "."
	if len(os.Args) > 1 {
		root = os.Args[1]
	}
	findings, err := lintTree(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "doclint:", err)
		os.Exit(2)
	}
	for _, f := range findings {
		fmt.Println(f)
	}
	if len(findings) > 0 {
		os.Exit(1)
	}
}

// Command testlist derives, from the tree, the lists of tests the Makefile runs, so that
// none is kept by hand:
//
//	go run ./tools/testlist -fast
//	    the packages whose tests need no server: neither they nor anything their test
//	    binary links imports a test rig (internal/testrig/...), which is what starts
//	    or reaches PostgreSQL, RabbitMQ and Temporal;
//	go run ./tools/testlist -fuzz
//	    every native fuzz target, as package:FuzzName (what .ci/fuzz.sh takes);
//	go run ./tools/testlist -marked temporal-server [-packages]
//	    a -run pattern matching exactly the tests whose doc comment carries the
//	    directive //mantis:temporal-server, or with -packages the packages holding them.
//
// It reads `go list -test` of the module in the working directory (or -dir) and parses
// the test files go list selects, so build constraints hold as for go test.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

func main() {
	dir := flag.String("dir", ".", "the module's root directory")
	fast := flag.Bool("fast", false, "list the packages whose tests need no server")
	fuzz := flag.Bool("fuzz", false, "list every fuzz target as package:FuzzName")
	marked := flag.String("marked", "", "print a -run pattern of the tests carrying the directive //mantis:`NAME`")
	packages := flag.Bool("packages", false, "with -marked, print the packages holding the marked tests instead")
	flag.Parse()
	modes := 0
	for _, on := range []bool{*fast, *fuzz, *marked != ""} {
		if on {
			modes++
		}
	}
	if modes != 1 || flag.NArg() != 0 || (*packages && *marked == "") {
		fmt.Fprintln(os.Stderr, "usage: testlist [-dir DIR] -fast | -fuzz | -marked NAME [-packages]")
		os.Exit(2)
	}
	out, err := run(*dir, *fast, *fuzz, *marked, *packages)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testlist:", err)
		os.Exit(1)
	}
	fmt.Println(out)
}

// run returns what one mode prints, on one line.
func run(dir string, fast, fuzz bool, marked string, packages bool) (string, error) {
	mod, err := listModule(dir)
	if err != nil {
		return "", err
	}
	switch {
	case fast:
		return strings.Join(mod.fastPackages(), " "), nil
	case fuzz:
		targets, err := mod.fuzzTargets()
		return strings.Join(targets, " "), err
	}
	tests, err := mod.markedTests(marked)
	if err != nil {
		return "", err
	}
	if len(tests) == 0 {
		return "", fmt.Errorf("no test carries //mantis:%s", marked)
	}
	if packages {
		return strings.Join(packagesOf(tests), " "), nil
	}
	return runPattern(tests), nil
}

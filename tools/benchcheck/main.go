// Command benchcheck holds the ratios `go test -bench` reported to the floors committed
// in bench/floors.toml (`make bench-check`): it reads the benchmark output, prints each
// floored ratio next to its floor, and exits 1 when one is below its floor or missing.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// maxLineBytes bounds one line of benchmark output.
const maxLineBytes = 1 << 20

func main() {
	floorsPath := flag.String("floors", "bench/floors.toml", "the floors: [Benchmark] metric = floor")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: benchcheck -floors bench/floors.toml <go test -bench output>")
		os.Exit(2)
	}
	if err := run(*floorsPath, flag.Arg(0), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "benchcheck:", err)
		os.Exit(1)
	}
}

// run checks the output at outPath against the floors at floorsPath.
func run(floorsPath, outPath string, w io.Writer) error {
	var floors map[string]map[string]float64
	if _, err := toml.DecodeFile(floorsPath, &floors); err != nil {
		return fmt.Errorf("reading floors %s: %w", floorsPath, err)
	}
	f, err := os.Open(outPath)
	if err != nil {
		return fmt.Errorf("reading benchmark output: %w", err)
	}
	defer f.Close()
	got, err := parseMetrics(f)
	if err != nil {
		return fmt.Errorf("reading benchmark output %s: %w", outPath, err)
	}
	return check(floors, got, w)
}

// parseMetrics returns the metrics of each benchmark result line ("BenchmarkX-2  1
// 12.5 unit  0.8 ratio ..."), by benchmark name without the -GOMAXPROCS suffix.
func parseMetrics(r io.Reader) (map[string]map[string]float64, error) {
	out := map[string]map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), maxLineBytes)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 4 || !strings.HasPrefix(fields[0], "Benchmark") {
			continue
		}
		if _, err := strconv.Atoi(fields[1]); err != nil {
			continue // a log line, not a result
		}
		name := benchName(fields[0])
		m := map[string]float64{}
		for i := 2; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				return nil, fmt.Errorf("%s: metric %q is not a number", name, fields[i])
			}
			m[fields[i+1]] = v
		}
		out[name] = m
	}
	return out, sc.Err()
}

// benchName is a result's benchmark name without the -GOMAXPROCS suffix go test adds;
// sub-benchmark names keep their own hyphens ("BenchmarkX/case-a-2" is
// "BenchmarkX/case-a").
func benchName(field string) string {
	i := strings.LastIndex(field, "-")
	if i < 0 {
		return field
	}
	if _, err := strconv.Atoi(field[i+1:]); err != nil {
		return field
	}
	return field[:i]
}

// check prints every floored metric and fails naming each one below its floor or
// missing from the output.
func check(floors, got map[string]map[string]float64, w io.Writer) error {
	var failed []string
	for _, bench := range sortedKeys(floors) {
		for _, metric := range sortedKeys(floors[bench]) {
			floor := floors[bench][metric]
			v, ok := got[bench][metric]
			verdict := "ok"
			switch {
			case !ok:
				verdict = "MISSING"
				failed = append(failed, bench+" "+metric+": not reported")
			case v < floor:
				verdict = "BELOW FLOOR"
				failed = append(failed, fmt.Sprintf("%s %s: %.3f is below its floor %.3f", bench, metric, v, floor))
			}
			fmt.Fprintf(w, "%-40s %-22s %8.3f  floor %6.3f  %s\n", bench, metric, v, floor, verdict)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d ratio(s) failed: %s", len(failed), strings.Join(failed, "; "))
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

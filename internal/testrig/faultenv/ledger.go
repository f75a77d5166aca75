package faultenv

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// LedgerEntry is one run of a command on a target, as the command itself wrote it.
type LedgerEntry struct {
	DispatchRequestID, Target, Step, PID, Time string
}

// ReadLedger reads every target's ledger file.
func (c *Cluster) ReadLedger() ([]LedgerEntry, error) {
	files, err := filepath.Glob(filepath.Join(c.LedgerDir, "*"))
	if err != nil {
		return nil, err
	}
	var out []LedgerEntry
	for _, path := range files {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("reading ledger %s: %w", path, err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			parts := strings.Split(sc.Text(), ",")
			if len(parts) != 5 {
				f.Close()
				return nil, fmt.Errorf("ledger %s: malformed line %q", path, sc.Text())
			}
			out = append(out, LedgerEntry{parts[0], parts[1], parts[2], parts[3], parts[4]})
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("reading ledger %s: %w", path, err)
		}
	}
	return out, nil
}

// runTwice counts the dispatch requests that appear more than once in the ledger.
func runTwice(entries []LedgerEntry) (int, []string) {
	seen := map[string]int{}
	for _, e := range entries {
		seen[e.DispatchRequestID]++
	}
	var twice []string
	for id, n := range seen {
		if n > 1 {
			twice = append(twice, fmt.Sprintf("%s ran %d times", id, n))
		}
	}
	return len(twice), twice
}

package main

import (
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const sampleOutput = `goos: linux
BenchmarkExecStoreCommandResult-2   	       1	      1049 bare-sql-calls/s	         0.6745 ratio-vs-bare-16	         1.339 ratio-vs-bare-256
BenchmarkDispatchClaim/claimers=3-2         	       1	     66538 bare-rows/s	     19311 claimpending-rows/s	         0.2902 ratio
BenchmarkFanOut/1000-targets-1-step-2   	       1	      2.46 seconds	         0.91 ratio
--- BENCH: BenchmarkExecStoreCommandResult-2
    bench_exec_test.go:90: BenchmarkNotAResult line of a table
PASS
`

func TestCheckPassesAtOrAboveTheFloors(t *testing.T) {
	got, err := parseMetrics(strings.NewReader(sampleOutput))
	require.NoError(t, err)
	require.InDelta(t, 1.339, got["BenchmarkExecStoreCommandResult"]["ratio-vs-bare-256"], 1e-9)
	floors := map[string]map[string]float64{"BenchmarkExecStoreCommandResult": {"ratio-vs-bare-16": 0.5, "ratio-vs-bare-256": 1.339}}
	require.NoError(t, check(floors, got, io.Discard))
}

func TestCheckFailsBelowAFloorAndOnAMissingRatio(t *testing.T) {
	got, err := parseMetrics(strings.NewReader(sampleOutput))
	require.NoError(t, err)
	floors := map[string]map[string]float64{
		"BenchmarkExecStoreCommandResult": {"ratio-vs-bare-256": 1.5},
		"BenchmarkDispatchClaim":          {"ratio": 0.7},
	}
	var out strings.Builder
	err = check(floors, got, &out)
	require.ErrorContains(t, err, "ratio-vs-bare-256: 1.339 is below its floor 1.500")
	require.ErrorContains(t, err, "BenchmarkDispatchClaim ratio: not reported")
	require.Contains(t, out.String(), "BELOW FLOOR")
}

func TestSubBenchmarksAreNamedWithTheirOwnHyphens(t *testing.T) {
	got, err := parseMetrics(strings.NewReader(sampleOutput))
	require.NoError(t, err)
	require.InDelta(t, 0.2902, got["BenchmarkDispatchClaim/claimers=3"]["ratio"], 1e-9)
	require.InDelta(t, 0.91, got["BenchmarkFanOut/1000-targets-1-step"]["ratio"], 1e-9)
}

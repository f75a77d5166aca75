package scale_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/testrig/scale"
)

func TestSumCountersAddsEveryLabelSet(t *testing.T) {
	text := `# HELP mantis_dispatch_claims_won_total Dispatch requests this replica claimed.
# TYPE mantis_dispatch_claims_won_total counter
mantis_dispatch_claims_won_total{priority="normal"} 120
mantis_dispatch_claims_won_total{priority="high",x="}"} 5
mantis_dispatch_claims_lost_total 3
mantis_dispatch_claims_won_total_extra 999
`
	sums, err := scale.SumCounters(strings.NewReader(text), scale.ClaimsWonMetric, scale.ClaimsLostMetric, "absent_total")
	require.NoError(t, err)
	require.Equal(t, 125.0, sums[scale.ClaimsWonMetric])
	require.Equal(t, 3.0, sums[scale.ClaimsLostMetric])
	require.Zero(t, sums["absent_total"])
}

func TestClassifySplitsMantisFromTemporal(t *testing.T) {
	require.Equal(t, scale.ConnTemporal, scale.Classify("temporal", "", "mandible "))
	require.Equal(t, scale.ConnMantis, scale.Classify("mantis", "mandible r-1", "mandible "))
	require.Equal(t, scale.ConnOther, scale.Classify("mantis", "", "mandible "))
}

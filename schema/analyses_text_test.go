package schema_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/internal/safetext"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/schema"
)

// A refining model's answer is text from outside: one holding NUL, or far too long, is
// stored bounded and as valid text, and the analysis ends done rather than stuck.
func TestAnalysisOutcomeTextIsBoundedAndStored(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := testenv.MigratedPool(t)
	_, err := schema.InsertExternalAnalysis(ctx, pool, external("model", "input \x00 with NUL"))
	require.NoError(t, err)
	queued, err := schema.LockQueuedAnalyses(ctx, pool, 1)
	require.NoError(t, err)
	require.Len(t, queued, 1)
	require.Equal(t, "input \u2400 with NUL", queued[0].Input)

	ok, err := schema.FinishAnalysis(ctx, pool, queued[0].ID, schema.AnalysisOutcome{
		Category: "unknown", Summary: "the model said\x00 " + strings.Repeat("blah ", 10<<10), Suggestion: "retry\x00", RefinedBy: "model",
	})
	require.NoError(t, err)
	require.True(t, ok)
	a, err := schema.AnalysisByExternalID(ctx, pool, "model")
	require.NoError(t, err)
	require.Equal(t, domain.AnalysisDone, a.Status)
	require.True(t, utf8.ValidString(a.Summary))
	require.True(t, strings.HasPrefix(a.Summary, "the model said\u2400 blah"))
	require.LessOrEqual(t, len(a.Summary), schema.MaxAnalysisTextBytes)
	require.Contains(t, a.Summary, safetext.TruncatedMarker)
	require.Equal(t, "retry\u2400", a.Suggestion)
}

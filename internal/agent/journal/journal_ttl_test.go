package journal

import (
	"testing"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/stretchr/testify/require"
)

// TestJournalOutlivesDispatchRequests checks the promise of Retention: a
// journal entry outlives the dispatch request it records, so no redelivery of that
// request can arrive after the record of its run is gone.
func TestJournalOutlivesDispatchRequests(t *testing.T) {
	require.Greater(t, Retention, domain.DispatchRequestTTL)
}

package agent

import (
	"testing"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/stretchr/testify/require"
)

// TestJournalOutlivesDispatchRequests checks the promise of JournalRetention: a
// journal entry outlives the dispatch request it records, so no redelivery of that
// request can arrive after the record of its run is gone.
func TestJournalOutlivesDispatchRequests(t *testing.T) {
	require.Greater(t, JournalRetention, domain.DispatchRequestTTL)
}

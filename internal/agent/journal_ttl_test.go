package agent

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/schema"
)

// TestJournalOutlivesDispatchRequests checks the promise of JournalRetention: a
// journal entry outlives the dispatch request it records, so no redelivery of that
// request can arrive after the record of its run is gone.
func TestJournalOutlivesDispatchRequests(t *testing.T) {
	require.Greater(t, JournalRetention, schema.DispatchRequestTTL)
}

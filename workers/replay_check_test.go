package workers

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The query lists the running executions of Mantis's workflow types only, on one
// task queue when asked, and refuses a type or queue it would have to quote.
func TestOpenExecutionsQuery(t *testing.T) {
	t.Parallel()
	q, err := openExecutionsQuery(nil, "")
	require.NoError(t, err)
	require.Equal(t, "ExecutionStatus = 'Running' AND (WorkflowType = 'Deployment' OR WorkflowType = 'Dispatcher' OR WorkflowType = 'DeclareTopology')", q)
	q, err = openExecutionsQuery([]string{"Dispatcher"}, "mandible-r1")
	require.NoError(t, err)
	require.Equal(t, "ExecutionStatus = 'Running' AND (WorkflowType = 'Dispatcher') AND TaskQueue = 'mandible-r1'", q)
	_, err = openExecutionsQuery([]string{"Deployment' OR 'x' = 'x"}, "")
	require.ErrorContains(t, err, "not one of Mantis's")
	_, err = openExecutionsQuery(nil, "q' OR TaskQueue != '")
	require.ErrorContains(t, err, "quotes and backslashes are not accepted")
}

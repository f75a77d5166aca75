package config_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/config"
)

// An output limit above what Mandible keeps is refused: a result that large could not
// even be sent in one gRPC message, and it would be lost.
func TestAgentOutputLimitIsAtMostWhatMandibleKeeps(t *testing.T) {
	t.Parallel()
	c := validAgent(config.ModePoll)
	c.Exec.OutputLimitBytes = config.MaxOutputLimitBytes
	require.NoError(t, c.Validate())
	c.Exec.OutputLimitBytes = 100 << 20
	require.Equal(t, []string{fmt.Sprintf("exec.output_limit_bytes: must be at most %d (what Mandible keeps), got %d", config.MaxOutputLimitBytes, 100<<20)},
		problems(t, c.Validate()))
}

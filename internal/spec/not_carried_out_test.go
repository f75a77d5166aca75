package spec

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNotCarriedOutNamesEveryRolloutField(t *testing.T) {
	t.Parallel()
	d := Deployment{
		Rollout:   &Rollout{Batches: []BatchSize{{Count: 1}}},
		Steps:     []Step{{Name: "a"}, {Name: "b", Rollout: &Rollout{}}},
		OnFailure: []Step{{Name: "undo", Command: "./rollback.sh"}},
	}
	require.Equal(t, []string{
		"rollout: " + NotCarriedOutYet,
		"steps[1].rollout: " + NotCarriedOutYet,
		"on_failure: " + NotCarriedOutYet,
	}, NotCarriedOut(d))
	require.Empty(t, NotCarriedOut(Deployment{Steps: []Step{{Name: "a", OnFailure: OnFailureAsk}}}),
		"a step's on_failure: ask is carried out")
}

package config_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/config"
)

// temporal.search_attributes_wait defaults to 60 s, takes a duration, and is refused,
// naming the key, when it is not above zero or longer than the bound.
func TestSearchAttributesWaitDefaultAndBounds(t *testing.T) {
	t.Parallel()
	require.Equal(t, 60*time.Second, config.DefaultSearchAttributesWait)
	require.Equal(t, config.DefaultSearchAttributesWait, config.DefaultMandible().Temporal.SearchAttributesWait.Duration)

	c := validMandible()
	require.NoError(t, c.Validate())
	for _, w := range []time.Duration{time.Second, config.MaxSearchAttributesWait} {
		c.Temporal.SearchAttributesWait.Duration = w
		require.NoError(t, c.Validate(), "a wait of %s", w)
	}
	for w, want := range map[time.Duration]string{
		0:                                  "temporal.search_attributes_wait: must be positive, got 0s",
		-time.Second:                       "temporal.search_attributes_wait: must be positive, got -1s",
		config.MaxSearchAttributesWait + 1: "temporal.search_attributes_wait: must be at most 30m0s, got 30m0.000000001s",
	} {
		c.Temporal.SearchAttributesWait.Duration = w
		require.Equal(t, []string{want}, problems(t, c.Validate()))
	}
}

// The key is read from the file; a value that is not a duration names the key.
func TestSearchAttributesWaitIsReadFromTheFile(t *testing.T) {
	t.Parallel()
	path := writeFile(t, "mandible.toml", "[temporal]\nsearch_attributes_wait = \"0s\"\n")
	_, err := config.LoadMandible(path, nil)
	require.ErrorContains(t, err, "temporal.search_attributes_wait: must be positive")

	path = writeFile(t, "mandible.toml", "[temporal]\nsearch_attributes_wait = \"a minute\"\n")
	_, err = config.LoadMandible(path, nil)
	require.ErrorContains(t, err, path)
	require.ErrorContains(t, err, "temporal.search_attributes_wait")

	path = writeFile(t, "mandible.toml", "[temporal]\nsearch_attributes_wait = \"90s\"\n")
	_, err = config.LoadMandible(path, nil)
	if err != nil {
		require.NotContains(t, err.Error(), "search_attributes_wait", "90s is a valid wait")
	}
}

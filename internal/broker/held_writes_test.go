package broker

import (
	"bytes"
	"errors"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

// recordingConn records each write it is handed.
type recordingConn struct {
	net.Conn
	writes [][]byte
	err    error
}

func (r *recordingConn) Write(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	r.writes = append(r.writes, bytes.Clone(p))
	return len(p), nil
}

func TestHeldWritesLeaveTogetherOnRelease(t *testing.T) {
	rec := &recordingConn{}
	c := &heldWrites{Conn: rec}
	_, err := c.Write([]byte("open"))
	require.NoError(t, err)
	require.Len(t, rec.writes, 1, "outside a hold a write passes straight through")

	c.hold()
	for _, p := range []string{"one", "two", "three"} {
		n, err := c.Write([]byte(p))
		require.NoError(t, err)
		require.Equal(t, len(p), n)
	}
	require.Len(t, rec.writes, 1, "held writes wait for the release")
	require.NoError(t, c.release())
	require.Equal(t, [][]byte{[]byte("open"), []byte("onetwothree")}, rec.writes, "the held writes leave in one, in order")

	_, err = c.Write([]byte("after"))
	require.NoError(t, err)
	require.Len(t, rec.writes, 3, "after the release writes pass through again")
	require.NoError(t, c.release(), "a release with nothing held writes nothing")
	require.Len(t, rec.writes, 3)
}

func TestHeldWritesAreBounded(t *testing.T) {
	rec := &recordingConn{}
	c := &heldWrites{Conn: rec}
	c.hold()
	chunk := make([]byte, heldWritesMax/4)
	for range 4 {
		_, err := c.Write(chunk)
		require.NoError(t, err)
	}
	require.Len(t, rec.writes, 1, "a hold writes what it keeps once that reaches its bound")
	require.Len(t, rec.writes[0], heldWritesMax)
	require.NoError(t, c.release())
	require.Len(t, rec.writes, 1)
}

func TestHeldWritesReportTheFailureOfWhatTheyKept(t *testing.T) {
	broken := errors.New("connection reset")
	rec := &recordingConn{}
	c := &heldWrites{Conn: rec}
	c.hold()
	_, err := c.Write([]byte("nudge"))
	require.NoError(t, err)
	rec.err = broken
	require.ErrorIs(t, c.release(), broken, "the release reports the failed write its callers were told had succeeded")
	_, err = c.Write([]byte("next"))
	require.ErrorIs(t, err, broken)
}

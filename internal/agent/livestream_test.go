package agent

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/contract/liveoutput"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

// recordingSink keeps what a liveStream sends it.
type recordingSink struct {
	mu      sync.Mutex
	started bool
	chunks  []*mantisv1.OutputChunk
	ended   chan struct{}
}

func newRecordingSink() *recordingSink { return &recordingSink{ended: make(chan struct{})} }

func (s *recordingSink) Start(*mantisv1.Command) { s.mu.Lock(); s.started = true; s.mu.Unlock() }
func (s *recordingSink) End(*mantisv1.Command)   { close(s.ended) }
func (s *recordingSink) Chunks(_ *mantisv1.Command, c []*mantisv1.OutputChunk) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.chunks = append(s.chunks, c...)
}

func (s *recordingSink) joined(t *testing.T) []byte {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var b bytes.Buffer
	for i, c := range s.chunks {
		require.Equal(t, int64(i), c.GetSeq(), "chunks come in seq order from 0")
		require.LessOrEqual(t, len(c.GetData()), liveoutput.MaxChunkBytes)
		b.Write(c.GetData())
	}
	return b.Bytes()
}

// Output is sent while the stream is open, in chunks of at most MaxChunkBytes, byte
// for byte (NUL and invalid UTF-8 included), and the sink hears the end after the last.
func TestLiveStreamSendsBytesInBoundedChunksWhileOpen(t *testing.T) {
	t.Parallel()
	sink := newRecordingSink()
	s := newLiveStream(&mantisv1.Command{Id: "c"}, sink)
	first := append([]byte("a\x00b\xff\xfe"), bytes.Repeat([]byte("z"), 40<<10)...)
	_, _ = s.Write(first)
	require.Eventually(t, func() bool { return len(sink.joined(t)) == len(first) }, 5*time.Second, 10*time.Millisecond,
		"output is sent before the stream closes")
	_, _ = s.Write([]byte("tail\n"))
	s.close()
	<-sink.ended
	require.Equal(t, append(first, "tail\n"...), sink.joined(t))
	require.True(t, sink.started)
}

// Output written faster than the buffer holds is dropped, and a marker saying how
// much stands where it was.
func TestLiveStreamDropsOverflowWithAMarker(t *testing.T) {
	t.Parallel()
	sink := newRecordingSink()
	s := newLiveStream(&mantisv1.Command{Id: "c"}, sink)
	block := bytes.Repeat([]byte("x"), liveoutput.MaxBufferedBytes)
	_, _ = s.Write(block)
	_, _ = s.Write([]byte("lost"))
	s.close()
	<-sink.ended
	got := string(sink.joined(t))
	require.True(t, strings.HasPrefix(got, string(block)))
	require.Equal(t, droppedMarker(4), got[len(block):])
}

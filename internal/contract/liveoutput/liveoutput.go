// Package liveoutput holds the bounds of live command output, shared by the agent
// that cuts it, Thorax that forwards it and Mandible that stores it: each side refuses
// or drops what passes them, so no link carries more than the next one takes.
//
// Live output is best effort. An agent streams a running command's output in chunks;
// a chunk lost on the way is a gap in what people watch, never a lost or late result:
// the result carries the output's tail on its own path.
package liveoutput

import "time"

const (
	// MaxChunkBytes is the most one chunk carries.
	MaxChunkBytes = 16 << 10
	// MaxChunksPerCall is the most chunks one ReportOutput or StoreCommandOutput call
	// carries.
	MaxChunksPerCall = 64
	// FlushInterval is how often an agent sends a running command's new output, at
	// most: output written in between waits for the next flush, unless a whole chunk
	// is ready.
	FlushInterval = 250 * time.Millisecond
	// MaxBytesPerSecond caps the output an agent streams per command; what is written
	// faster waits in the agent's buffer, and what overflows it is dropped with a
	// marker.
	MaxBytesPerSecond = 1 << 20
	// MaxBufferedBytes bounds the output an agent holds per command while it waits to
	// send it.
	MaxBufferedBytes = 1 << 20
)

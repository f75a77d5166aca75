package config

// SSE bounds Mandible's event streams (/sse).
type SSE struct {
	// MaxStreams caps the event streams open at once on a replica; one more is
	// refused with 429. Each holds a connection under HTTP/1.1, so it stays below
	// http.max_connections, leaving room for the API.
	MaxStreams int `toml:"max_streams"`
	// MaxStreamsPerCaller caps the streams one caller (an API token, or the token a
	// console session names) has open at once on a replica; one more is refused with 429.
	MaxStreamsPerCaller int `toml:"max_streams_per_caller"`
	// MaxReplayEvents bounds how far back a stream may resume (Last-Event-ID), in
	// event ids: a replay reads at most this much of the log, filter or not. A
	// stream resuming further back gets a reset event first and goes on from there.
	MaxReplayEvents int64 `toml:"max_replay_events"`
}

func defaultSSE() SSE {
	return SSE{MaxStreams: 512, MaxStreamsPerCaller: 32, MaxReplayEvents: 50000}
}

func (s SSE) validate(p *problems, maxConnections int) {
	p.positive("sse.max_streams", int64(s.MaxStreams))
	p.positive("sse.max_streams_per_caller", int64(s.MaxStreamsPerCaller))
	p.positive("sse.max_replay_events", s.MaxReplayEvents)
	if s.MaxStreamsPerCaller > s.MaxStreams {
		p.add("sse.max_streams_per_caller", "must be at most sse.max_streams (%d), got %d", s.MaxStreams, s.MaxStreamsPerCaller)
	}
	if maxConnections > 0 && s.MaxStreams >= maxConnections {
		p.add("sse.max_streams", "must be below http.max_connections (%d), so that the API still answers with every stream open, got %d",
			maxConnections, s.MaxStreams)
	}
}

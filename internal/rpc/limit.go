// The message size bounds of the gRPC links between Mandible,
// Thorax and the agents. Both ends of each link set them explicitly, so that neither
// depends on the other's default (gRPC receives at most 4 MiB unless told otherwise).

package rpc

import "google.golang.org/grpc"

const (
	// MaxMessageBytes is the largest gRPC message a Mandible, Thorax or agent sends or
	// receives. One command at its largest (a 64 KiB command and 256 env values of
	// 32 KiB each, 8 MiB and change once opened) fits in one message.
	MaxMessageBytes = 16 << 20

	// FetchAnswerBytes bounds a FetchPendingCommands answer: Mandible stops claiming
	// commands before those it has taken pass it (the first one is always taken). It is
	// below gRPC's 4 MiB default, so that a Thorax of a release that sets no limit of
	// its own still receives every answer of commands under 1 MiB.
	FetchAnswerBytes = 3 << 20
)

// MaxConcurrentStreams bounds the calls one connection may have open at once on a
// Mandible, Thorax or agent server (gRPC sets no bound of its own): a peer that opens
// streams without end holds at most this many handlers. A Thorax's calls to Mandible
// and an agent's to its Thorax stay far below it; past it, a call waits in its client
// for room.
const MaxConcurrentStreams = 1024

// ServerOptions set a server's message bounds to MaxMessageBytes both ways, and its
// streams per connection to MaxConcurrentStreams.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.MaxRecvMsgSize(MaxMessageBytes), grpc.MaxSendMsgSize(MaxMessageBytes),
		grpc.MaxConcurrentStreams(MaxConcurrentStreams)}
}

// DialOption sets a client's message bounds to MaxMessageBytes both ways.
func DialOption() grpc.DialOption {
	return grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes), grpc.MaxCallSendMsgSize(MaxMessageBytes))
}

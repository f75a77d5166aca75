// Retryable decides, in one place, which failed gRPC calls are worth
// repeating. Every Mantis gRPC client (agents reporting to Thorax, Thorax
// calling Mandible or agents) asks Retryable rather than keeping its own list
// of codes.

package rpc

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Retryable reports whether a call that failed with err may succeed if it is
// made again unchanged: the server was unreachable, overloaded, slow or
// interrupted, or the failure came from the transport rather than from an
// answer. It is false for nil, for a cancelled call (the caller gave up, so
// its context decides) and for every code in which a server that understood
// the call said no (InvalidArgument, NotFound, AlreadyExists,
// PermissionDenied, FailedPrecondition, OutOfRange, Unimplemented,
// Unauthenticated).
func Retryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	return RetryableCode(status.Code(err))
}

// RetryableCode reports whether a call that ended with code may succeed if it
// is made again; see Retryable.
func RetryableCode(code codes.Code) bool {
	switch code {
	case codes.Unavailable, // no connection, server stopping or draining
		codes.DeadlineExceeded,  // the server, or the way to it, was too slow
		codes.ResourceExhausted, // overloaded or rate limited: later may do
		codes.Aborted,           // a conflict that a new attempt resolves
		codes.Unknown,           // an error without a status: a transport failure or a non-gRPC error
		codes.Internal:          // also what gRPC reports for broken streams (RST_STREAM, bad frames)
		return true
	}
	return false
}

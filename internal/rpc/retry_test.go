package rpc_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mantis-deploy/mantis/internal/rpc"
)

func TestRetryableFollowsWhatTheCodeMeans(t *testing.T) {
	t.Parallel()

	retry := []codes.Code{codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted,
		codes.Aborted, codes.Unknown, codes.Internal}
	refused := []codes.Code{codes.OK, codes.Canceled, codes.InvalidArgument, codes.NotFound,
		codes.AlreadyExists, codes.PermissionDenied, codes.FailedPrecondition, codes.OutOfRange,
		codes.Unimplemented, codes.Unauthenticated, codes.DataLoss}
	for _, c := range retry {
		require.True(t, rpc.Retryable(status.Error(c, "x")), "%s", c)
		require.True(t, rpc.Retryable(fmt.Errorf("calling: %w", status.Error(c, "x"))), "wrapped %s", c)
	}
	for _, c := range refused {
		require.False(t, rpc.Retryable(status.Error(c, "x")), "%s", c)
	}
	require.False(t, rpc.Retryable(nil))
	require.False(t, rpc.Retryable(context.Canceled))
	require.True(t, rpc.Retryable(context.DeadlineExceeded))
	require.True(t, rpc.Retryable(errors.New("connection reset by peer")), "an error without a status is the transport's")
}

package agent

import (
	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

// WatchOutput streams the live output of the named command: the chunks the agent
// still keeps, then each one as it is cut, until the command's output ends. A command
// that does not start within watchStartWait ends the stream empty.
func (s *Server) WatchOutput(req *mantisv1.WatchOutputRequest, stream grpc.ServerStreamingServer[mantisv1.OutputChunk]) error {
	if _, err := uuid.Parse(req.GetCommandId()); err != nil {
		return status.Errorf(codes.InvalidArgument, "command_id: must be a UUID, got %q", boundError(req.GetCommandId()))
	}
	if err := s.hub.watch(stream.Context(), req.GetCommandId(), stream.Send); err != nil {
		return status.FromContextError(err).Err()
	}
	return nil
}

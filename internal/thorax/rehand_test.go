package thorax

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

// pollNaming is a poll of the agent session "s1" that names the commands it holds.
func pollNaming(target string, wait time.Duration, held ...string) *mantisv1.PollCommandsRequest {
	return pollOfSession("s1", target, wait, held...)
}

func pollOfSession(session, target string, wait time.Duration, held ...string) *mantisv1.PollCommandsRequest {
	req := poll(target, 10, wait)
	req.Session, req.HeldCommandIds, req.NamesHeld = session, held, true
	return req
}

func commandIDs(resp *mantisv1.PollCommandsResponse) []string {
	var ids []string
	for _, c := range resp.GetCommands() {
		ids = append(ids, c.GetId())
	}
	slices.Sort(ids)
	return ids
}

// An answer that never reached its agent loses nothing: the agent's next poll names
// what it holds, and Thorax hands again what it handed and the poll does not name.
// A poll that does not name what it holds (an older agent) gets nothing again, and
// a command whose result was stored is not handed again.
func TestPollHandsAgainWhatTheAgentDoesNotNameAsHeld(t *testing.T) {
	t.Parallel()
	f := setup(t)
	th := f.start(t)
	client := f.pollClient(t, th)
	a, b := commandID("cmd-a"), commandID("cmd-b")

	first := make(chan *mantisv1.PollCommandsResponse, 1)
	go func() {
		resp, err := client.PollCommands(t.Context(), pollNaming("web-poll", 50*time.Second))
		require.NoError(t, err)
		first <- resp
	}()
	f.mandible.waitFetchFor(t, "web-poll")
	f.mandible.queue(pollCommand("cmd-a", "web-poll", 1), pollCommand("cmd-b", "web-poll", 1))
	got := receive(t, first)
	require.NotEmpty(t, got.GetCommands())
	if len(got.GetCommands()) == 1 { // the second command came after the answer
		resp, err := client.PollCommands(t.Context(), pollNaming("web-poll", 50*time.Second, got.GetCommands()[0].GetId()))
		require.NoError(t, err)
		require.Len(t, resp.GetCommands(), 1)
	}

	// The agent never saw those answers. A poll that does not name what it holds
	// gets nothing.
	resp, err := client.PollCommands(t.Context(), poll("web-poll", 10, 100*time.Millisecond))
	require.NoError(t, err)
	require.Empty(t, resp.GetCommands())

	// Another agent process of the same target (a second agent wrongly started for
	// it) naming nothing does not take what the first one's polls took.
	resp, err = client.PollCommands(t.Context(), pollOfSession("s2", "web-poll", 100*time.Millisecond))
	require.NoError(t, err)
	require.Empty(t, resp.GetCommands())

	// Naming only a: b is handed again at once.
	resp, err = client.PollCommands(t.Context(), pollNaming("web-poll", 50*time.Second, a))
	require.NoError(t, err)
	require.Equal(t, []string{b}, commandIDs(resp))

	// Naming neither: both.
	resp, err = client.PollCommands(t.Context(), pollNaming("web-poll", 50*time.Second))
	require.NoError(t, err)
	require.Equal(t, commandIDs(&mantisv1.PollCommandsResponse{Commands: []*mantisv1.Command{
		pollCommand("cmd-a", "web-poll", 1), pollCommand("cmd-b", "web-poll", 1)}}), commandIDs(resp))

	// a's result is stored; naming b alone hands nothing again.
	_, err = client.ReportResult(t.Context(), &mantisv1.ReportResultRequest{
		Target: "web-poll", CommandId: a, Result: &mantisv1.CommandResult{ExitCode: 0},
	})
	require.NoError(t, err)
	require.Equal(t, a, receive(t, f.mandible.stored).GetCommandId())
	resp, err = client.PollCommands(t.Context(), pollNaming("web-poll", 100*time.Millisecond, b))
	require.NoError(t, err)
	require.Empty(t, resp.GetCommands())
}

// A poll's list of held commands is bounded and each entry must be a UUID; the
// session that names them is required and bounded.
func TestPollRefusesABadListOfHeldCommands(t *testing.T) {
	t.Parallel()
	f := setup(t)
	th := f.start(t)
	client := f.pollClient(t, th)

	tooMany := make([]string, maxHeldNames+1)
	for i := range tooMany {
		tooMany[i] = commandID("c")
	}
	for _, tc := range []struct {
		req  *mantisv1.PollCommandsRequest
		want string
	}{
		{pollNaming("web-poll", 0, tooMany...), "held_command_ids: at most 1024 ids, got 1025"},
		{pollNaming("web-poll", 0, commandID("c"), "not-a-uuid"), "held_command_ids[1]: must be a UUID"},
		{pollOfSession("", "web-poll", 0), "session: required with names_held"},
		{pollOfSession("two words", "web-poll", 0), "session: must match"},
		{pollOfSession(strings.Repeat("s", 65), "web-poll", 0), "session: must match"},
	} {
		_, err := client.PollCommands(t.Context(), tc.req)
		require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
		require.Contains(t, status.Convert(err).Message(), tc.want)
	}
}

package grpcapi_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

// FuzzRegisterInstance: a refused name writes nothing; an accepted one is stored
// trimmed, under the id answered.
func FuzzRegisterInstance(f *testing.F) {
	for _, s := range [][2]string{{"thorax-a", "1.0"}, {"", ""}, {"  ", "v"}, {"a\x00b", "v"}, {strings.Repeat("n", 200), "v"}, {"ok", "v\x00\x01" + strings.Repeat("v", 300)}} {
		f.Add(s[0], s[1])
	}
	m := newFuzzMandible(f)
	f.Fuzz(func(t *testing.T, name, version string) {
		var resp *mantisv1.RegisterInstanceResponse
		err := m.call(t, func(ctx context.Context) (err error) {
			resp, err = m.client.RegisterInstance(ctx, &mantisv1.RegisterInstanceRequest{Name: pickID(false, "", name), Version: pickID(false, "", version)})
			return err
		}, "name")
		if err != nil {
			return
		}
		var stored string
		require.NoError(t, m.pool.QueryRow(context.Background(), `SELECT name FROM thorax_instances WHERE id = $1`, resp.GetInstanceId()).Scan(&stored))
		require.Equal(t, strings.TrimSpace(strings.ToValidUTF8(name, "\uFFFD")), stored)
	})
}

// FuzzHeartbeat: any instance id and poll targets; a refusal writes nothing.
func FuzzHeartbeat(f *testing.F) {
	f.Add(true, "", "web-1\nweb-2", false)
	f.Add(false, uuid.NewString(), "web-1", false)
	f.Add(false, "not-a-uuid", "", true)
	f.Add(true, "", "bad name\n\x00\n", false)
	f.Add(true, "", strings.Repeat("t\n", 50), true)
	m := newFuzzMandible(f)
	f.Fuzz(func(t *testing.T, live bool, instance, pollTargets string, draining bool) {
		if draining && live {
			draining = false // a draining fixture instance would stop taking commands
		}
		_ = m.call(t, func(ctx context.Context) error {
			_, err := m.client.Heartbeat(ctx, &mantisv1.HeartbeatRequest{InstanceId: pickID(live, m.instance, instance), PollTargets: splitList(pollTargets), Draining: draining})
			return err
		}, "instance_id", "poll_targets")
	})
}

// FuzzFetchPendingCommands: any instance, targets, count and command ids.
func FuzzFetchPendingCommands(f *testing.F) {
	f.Add(true, "", "web-1", int32(10), "")
	f.Add(true, "", "web-1", int32(0), "")
	f.Add(true, "", "web-1", int32(1001), "")
	f.Add(true, "", "", int32(5), uuid.NewString()+"\nnot-a-uuid")
	f.Add(false, "x", "web-1", int32(1), "")
	f.Add(true, "", "web-1\n\x00", int32(3), "")
	m := newFuzzMandible(f)
	f.Fuzz(func(t *testing.T, live bool, instance, pollTargets string, max int32, commandIDs string) {
		_ = m.call(t, func(ctx context.Context) error {
			_, err := m.client.FetchPendingCommands(ctx, &mantisv1.FetchPendingCommandsRequest{InstanceId: pickID(live, m.instance, instance),
				PollTargets: splitList(pollTargets), MaxCommands: max, CommandIds: splitList(commandIDs)})
			return err
		}, "instance_id", "max_commands", "command_ids", "poll_targets")
	})
}

// FuzzStoreCommandResult: any result for a held command or any other; a refused
// result writes nothing, an accepted one ends the command.
func FuzzStoreCommandResult(f *testing.F) {
	f.Add(true, "", true, "", int64(1), true, int32(0), []byte("hi\n"), "", int64(1700000000), int64(1700000001))
	f.Add(true, "", true, "", int64(2), true, int32(1), []byte{0, 1, 2}, "boom", int64(0), int64(0))
	f.Add(true, "", true, "", int64(0), true, int32(0), []byte(nil), "", int64(0), int64(0))
	f.Add(true, "", true, "", int64(1), false, int32(0), []byte(nil), "", int64(0), int64(0))
	f.Add(true, "", true, "", int64(1), true, int32(-1), []byte("x"), "err\x00or", int64(-99999999999999), int64(253402300800))
	f.Add(false, "bad", false, "bad", int64(1), true, int32(0), []byte(nil), "", int64(0), int64(0))
	m := newFuzzMandible(f)
	f.Fuzz(func(t *testing.T, live bool, instance string, held bool, command string, epoch int64, withResult bool, exit int32,
		output []byte, errText string, startedAt, finishedAt int64) {
		cmd := command
		if held {
			cmd = m.heldCommand(t)
		}
		req := &mantisv1.StoreCommandResultRequest{InstanceId: pickID(live, m.instance, instance), CommandId: pickID(held, cmd, command), LeaseEpoch: epoch}
		if withResult {
			req.Result = &mantisv1.CommandResult{ExitCode: exit, Output: output, Error: pickID(false, "", errText)}
			if startedAt != 0 {
				req.Result.StartedAt = &timestamppb.Timestamp{Seconds: startedAt}
			}
			if finishedAt != 0 {
				req.Result.FinishedAt = &timestamppb.Timestamp{Seconds: finishedAt}
			}
		}
		err := m.call(t, func(ctx context.Context) error {
			_, err := m.client.StoreCommandResult(ctx, req)
			return err
		}, "instance_id", "command_id", "lease_epoch", "result")
		if err != nil || !held {
			return
		}
		var st string
		require.NoError(t, m.pool.QueryRow(context.Background(), `SELECT status FROM command_queue WHERE id = $1`, cmd).Scan(&st))
		require.Contains(t, []string{"succeeded", "failed", "cancelled"}, st, "an accepted result leaves the command %s", st)
	})
}

// FuzzScheduleRedispatch: any redispatch request for a held command or any other.
func FuzzScheduleRedispatch(f *testing.F) {
	f.Add(true, "", true, "", int64(1), "agent unreachable")
	f.Add(true, "", true, "", int64(-1), "")
	f.Add(true, "", true, "", int64(0), "nudge failed")
	f.Add(true, "", false, uuid.NewString(), int64(1), "r\x00")
	f.Add(false, "", false, "", int64(1), strings.Repeat("reason ", 1000))
	m := newFuzzMandible(f)
	f.Fuzz(func(t *testing.T, live bool, instance string, held bool, command string, epoch int64, reason string) {
		cmd := command
		if held {
			cmd = m.heldCommand(t)
		}
		_ = m.call(t, func(ctx context.Context) error {
			_, err := m.client.ScheduleRedispatch(ctx, &mantisv1.ScheduleRedispatchRequest{InstanceId: pickID(live, m.instance, instance),
				CommandId: pickID(held, cmd, command), LeaseEpoch: epoch, Reason: pickID(false, "", reason)})
			return err
		}, "instance_id", "command_id", "lease_epoch")
	})
}

// FuzzReleaseCommands: any list of leases; a held command released goes back to the
// queue.
func FuzzReleaseCommands(f *testing.F) {
	f.Add(true, "", true, int64(1), "")
	f.Add(true, "", true, int64(7), uuid.NewString())
	f.Add(true, "", false, int64(1), "not-a-uuid")
	f.Add(false, "x", false, int64(-1), "")
	m := newFuzzMandible(f)
	f.Fuzz(func(t *testing.T, live bool, instance string, held bool, epoch int64, others string) {
		req := &mantisv1.ReleaseCommandsRequest{InstanceId: pickID(live, m.instance, instance)}
		if held {
			req.Commands = append(req.Commands, &mantisv1.CommandLease{CommandId: m.heldCommand(t), LeaseEpoch: epoch})
		}
		for _, id := range splitList(others) {
			req.Commands = append(req.Commands, &mantisv1.CommandLease{CommandId: id, LeaseEpoch: epoch})
		}
		_ = m.call(t, func(ctx context.Context) error {
			_, err := m.client.ReleaseCommands(ctx, req)
			return err
		}, "instance_id", "commands")
	})
}

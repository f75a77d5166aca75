package workflows_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Temporal's limits on what one run carries besides its history: the size of one
// payload (a workflow's or an activity's input or result) and the activities pending
// at once.
const (
	payloadBytesLimit    = 2 << 20
	pendingActivityLimit = 2000
)

// runLoad is what one run carried at its largest: the largest payload, the event that
// carried it, and the most activities pending at once.
type runLoad struct {
	maxPayload   int
	payloadEvent enumspb.EventType
	maxPending   int
}

// runLoadOf reads a run's whole history and measures its load.
func runLoadOf(ctx context.Context, t *testing.T, c client.Client, id, runID string) runLoad {
	t.Helper()
	it := c.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var load runLoad
	pending := 0
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err, "reading the history of %s run %s", id, runID)
		if n := largestPayload(ev.ProtoReflect()); n > load.maxPayload {
			load.maxPayload, load.payloadEvent = n, ev.GetEventType()
		}
		pending += pendingChange(ev)
		load.maxPending = max(load.maxPending, pending)
	}
	require.Zero(t, pending, "%s run %s ended with activities still pending", id, runID)
	return load
}

// pendingChange is how an event changes the number of pending activities: one more
// when one is scheduled, one fewer when one closes however it closed.
func pendingChange(ev *historypb.HistoryEvent) int {
	switch ev.GetEventType() {
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
		return 1
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED,
		enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT, enumspb.EVENT_TYPE_ACTIVITY_TASK_CANCELED:
		return -1
	}
	return 0
}

// largestPayload is the encoded size of the largest payload anywhere in m: an input, a
// result, a failure's details, a search attribute. A Payloads (a call's arguments or
// results together) counts whole, as Temporal's payload limit does.
func largestPayload(m protoreflect.Message) int {
	switch p := m.Interface().(type) {
	case *commonpb.Payloads:
		return proto.Size(p)
	case *commonpb.Payload:
		return proto.Size(p)
	}
	largest := 0
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			for i := range v.List().Len() {
				largest = max(largest, largestPayload(v.List().Get(i).Message()))
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				largest = max(largest, largestPayload(mv.Message()))
				return true
			})
		case !fd.IsList() && !fd.IsMap() && fd.Message() != nil:
			largest = max(largest, largestPayload(v.Message()))
		}
		return true
	})
	return largest
}

// TestLargestPayloadFindsNestedPayloads shows that the measure above is not vacuous:
// it finds a payload nested in an event's attributes and one in a map.
func TestLargestPayloadFindsNestedPayloads(t *testing.T) {
	t.Parallel()
	big := &commonpb.Payloads{Payloads: []*commonpb.Payload{{Data: make([]byte, 5000)}}}
	ev := &historypb.HistoryEvent{
		EventType: enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
		Attributes: &historypb.HistoryEvent_ActivityTaskScheduledEventAttributes{
			ActivityTaskScheduledEventAttributes: &historypb.ActivityTaskScheduledEventAttributes{
				Input:  big,
				Header: &commonpb.Header{Fields: map[string]*commonpb.Payload{"k": {Data: make([]byte, 100)}}},
			},
		},
	}
	require.Equal(t, proto.Size(big), largestPayload(ev.ProtoReflect()))
	require.Greater(t, proto.Size(big), 5000)
	ev.GetActivityTaskScheduledEventAttributes().Input = nil
	require.Greater(t, largestPayload(ev.ProtoReflect()), 100, "the header's payload in a map")
	require.Equal(t, 1, pendingChange(ev))
}

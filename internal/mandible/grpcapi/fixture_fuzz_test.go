package grpcapi_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/internal/mandible/grpcapi"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
	"github.com/mantis-deploy/mantis/schema"
)

// fuzzTarget is the poll target of the fuzz fixture's commands.
const fuzzTarget = "web-1"

// fuzzMandible is one MandibleService on a loopback listener over one migrated
// database, shared by every input of a fuzz target, with a live instance to name.
type fuzzMandible struct {
	pool     *pgxpool.Pool
	client   mantisv1.MandibleServiceClient
	instance string
}

// newFuzzMandible starts the service. The transport is plaintext: what is fuzzed is
// the request, not the TLS handshake the other tests cover.
func newFuzzMandible(f *testing.F) *fuzzMandible {
	f.Helper()
	pool := testenv.MigratedPool(f)
	allowParallel(f, pool) // many commands of one target at once
	srv := grpc.NewServer()
	mantisv1.RegisterMandibleServiceServer(srv, &grpcapi.MandibleService{DB: pool, Logger: testLogger(), HeartbeatTimeout: time.Hour, ReplicaID: "r1"})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(f, err)
	go func() { _ = srv.Serve(lis) }()
	f.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(f, err)
	f.Cleanup(func() { conn.Close() })
	m := &fuzzMandible{pool: pool, client: mantisv1.NewMandibleServiceClient(conn)}
	resp, err := m.client.RegisterInstance(context.Background(), &mantisv1.RegisterInstanceRequest{Name: "thorax-fuzz", Version: "test"})
	require.NoError(f, err)
	m.instance = resp.GetInstanceId()
	_, err = m.client.Heartbeat(context.Background(), &mantisv1.HeartbeatRequest{InstanceId: m.instance, PollTargets: []string{fuzzTarget}})
	require.NoError(f, err)
	return m
}

// heldCommand dispatches a command to fuzzTarget and has the fixture's instance claim
// it, returning its id at lease epoch 1.
func (m *fuzzMandible) heldCommand(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	_, err := schema.EnqueueDispatchRequests(ctx, m.pool, []schema.NewDispatchRequest{
		{IdempotencyKey: uuid.NewString(), Target: fuzzTarget, Command: "echo hi", Priority: "normal"}})
	require.NoError(t, err)
	claim, err := schema.ClaimPending(ctx, m.pool, "r1", 10)
	require.NoError(t, err)
	refs := make([]domain.ClaimRef, len(claim.Claimed))
	for i, c := range claim.Claimed {
		refs[i] = domain.ClaimRef{ID: c.ID, Epoch: c.Epoch}
	}
	_, err = schema.DeliverClaimed(ctx, m.pool, "r1", refs, schema.DeliverOptions{HeartbeatTimeout: time.Hour})
	require.NoError(t, err)
	resp, err := m.client.FetchPendingCommands(ctx, &mantisv1.FetchPendingCommandsRequest{InstanceId: m.instance, PollTargets: []string{fuzzTarget}, MaxCommands: 1})
	require.NoError(t, err)
	require.Len(t, resp.GetCommands(), 1)
	return resp.GetCommands()[0].GetId()
}

// pickID returns the fixture's value when pick says so, else the fuzzed one, made valid
// UTF-8 as every gRPC client must send.
func pickID(pick bool, fixture, fuzzed string) string {
	if pick {
		return fixture
	}
	return strings.ToValidUTF8(fuzzed, "\uFFFD")
}

// validUTF8 makes each string valid UTF-8.
func validUTF8(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strings.ToValidUTF8(s, "\uFFFD")
	}
	return out
}

// splitList turns one fuzzed string into a list, on newlines.
func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return validUTF8(strings.Split(s, "\n"))
}

// fingerprint digests every row of every table, so that a write shows as a change.
func (m *fuzzMandible) fingerprint(t *testing.T) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := m.pool.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename`)
	require.NoError(t, err)
	var parts []string
	for rows.Next() {
		var name string
		require.NoError(t, rows.Scan(&name))
		parts = append(parts, `SELECT '`+name+`', md5(coalesce(string_agg(x::text, '|' ORDER BY x::text), '')) FROM "`+name+`" x`)
	}
	require.NoError(t, rows.Err())
	rows, err = m.pool.Query(ctx, strings.Join(parts, " UNION ALL "))
	require.NoError(t, err)
	out := map[string]string{}
	for rows.Next() {
		var name, sum string
		require.NoError(t, rows.Scan(&name, &sum))
		out[name] = sum
	}
	require.NoError(t, rows.Err())
	return out
}

// refusalCodes are the answers a request may get besides OK: whatever it holds, it is
// never an INTERNAL or UNKNOWN error.
var refusalCodes = []codes.Code{codes.InvalidArgument, codes.NotFound, codes.FailedPrecondition}

// requireClearRefusal checks err: a refusal code, and for INVALID_ARGUMENT a message
// that starts with one of fields.
func requireClearRefusal(t *testing.T, err error, fields ...string) {
	t.Helper()
	st := status.Convert(err)
	require.Contains(t, refusalCodes, st.Code(), "input answered %s: %s", st.Code(), st.Message())
	require.NotEmpty(t, st.Message())
	if st.Code() != codes.InvalidArgument {
		return
	}
	for _, f := range fields {
		if strings.HasPrefix(st.Message(), f) {
			return
		}
	}
	require.Failf(t, "a refusal names no field", "%s (fields: %v)", st.Message(), fields)
}

// call runs one RPC, checking that nothing is written when it is refused. It returns
// the RPC's error, nil when it was accepted.
func (m *fuzzMandible) call(t *testing.T, rpc func(ctx context.Context) error, fields ...string) error {
	t.Helper()
	before := m.fingerprint(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := rpc(ctx)
	if err != nil {
		requireClearRefusal(t, err, fields...)
		require.Equal(t, before, m.fingerprint(t), "a refused request wrote: %v", err)
	}
	return err
}

package grpcapi_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/mantis-deploy/mantis/internal/codec"
	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/internal/mandible/grpcapi"
	"github.com/mantis-deploy/mantis/internal/rpc"
	"github.com/mantis-deploy/mantis/internal/secretenv"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
	"github.com/mantis-deploy/mantis/schema"
)

// FetchPendingCommands hands a command its secret env opened; a command whose secret
// does not open (sealed for another deployment) is not handed out but failed at once,
// with the reason and never the value.
func TestFetchOpensSecretEnvAndFailsACommandWhoseSecretDoesNotOpen(t *testing.T) {
	t.Parallel()
	b, k := setupSecrets(t, secretenv.Resolver{})
	ctx, pool := b.ctx, b.pool

	inst := b.register(t, "thorax-a")
	_, err := b.client.Heartbeat(ctx, &mantisv1.HeartbeatRequest{InstanceId: inst, PollTargets: []string{"web-1", "web-2"}})
	require.NoError(t, err)
	good, err := secretenv.Seal(k, "", "TOKEN", "s3cret-good")
	require.NoError(t, err)
	stolen, err := secretenv.Seal(k, "5f0c6a53-0000-4000-8000-000000000000", "TOKEN", "s3cret-stolen")
	require.NoError(t, err)
	_, err = schema.EnqueueDispatchRequests(ctx, pool, []schema.NewDispatchRequest{
		{IdempotencyKey: "good", Target: "web-1", Command: "true", Priority: "normal", Env: map[string]string{"TOKEN": good, "PLAIN": "p"}},
		{IdempotencyKey: "stolen", Target: "web-2", Command: "true", Priority: "normal", Env: map[string]string{"TOKEN": stolen}},
	})
	require.NoError(t, err)
	claim, err := schema.ClaimPending(ctx, pool, "r1", 10)
	require.NoError(t, err)
	refs := make([]domain.ClaimRef, len(claim.Claimed))
	for i, c := range claim.Claimed {
		refs[i] = domain.ClaimRef{ID: c.ID, Epoch: c.Epoch}
	}
	_, err = schema.DeliverClaimed(ctx, pool, "r1", refs, schema.DeliverOptions{HeartbeatTimeout: time.Hour})
	require.NoError(t, err)

	resp, err := b.client.FetchPendingCommands(ctx, &mantisv1.FetchPendingCommandsRequest{InstanceId: inst, PollTargets: []string{"web-1", "web-2"}, MaxCommands: 10})
	require.NoError(t, err)
	require.Len(t, resp.GetCommands(), 1, "the command whose secret does not open is not handed out")
	require.Equal(t, "web-1", resp.GetCommands()[0].GetTarget())
	require.Equal(t, map[string]string{"TOKEN": "s3cret-good", "PLAIN": "p"}, resp.GetCommands()[0].GetEnv())
	require.Equal(t, []string{"TOKEN"}, resp.GetCommands()[0].GetSecretEnv(), "the agent is told which values to mask")

	var status, reason string
	require.NoError(t, pool.QueryRow(ctx, `SELECT c.status, coalesce(c.error, '') FROM command_queue c JOIN targets t ON t.id = c.target_id
		WHERE t.name = 'web-2'`).Scan(&status, &reason))
	require.Equal(t, "failed", status, "it ends rather than runs without its secret")
	require.Contains(t, reason, "another deployment or variable")
	require.NotContains(t, reason, "s3cret")
}

// Secrets opened from files can make commands far larger than the claim measured
// them (a reference is a few bytes, its file up to 32 KiB): what would pass the
// message limit once opened goes back to the queue, unsent, and the next fetch hands
// it out. Three commands of 200 such secrets each open to about 6.4 MiB apiece; the
// first answer carries two.
func TestFetchHandsBackCommandsTheirOpenedSecretsMakeTooLarge(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "bulk")
	require.NoError(t, os.WriteFile(file, bytes.Repeat([]byte("s"), secretenv.MaxFileBytes), 0o600))
	b, k := setupSecrets(t, secretenv.Resolver{FilesDir: dir})
	ctx := b.ctx
	allowParallel(t, b.pool) // three commands of one target at once
	inst := b.register(t, "thorax-a")
	_, err := b.client.Heartbeat(ctx, &mantisv1.HeartbeatRequest{InstanceId: inst, PollTargets: []string{"web-1"}})
	require.NoError(t, err)
	env := map[string]string{}
	for i := range 200 {
		name := fmt.Sprintf("S_%d", i)
		env[name], err = secretenv.Seal(k, "", name, "file:"+file)
		require.NoError(t, err)
	}
	var reqs []schema.NewDispatchRequest
	for i := range 3 {
		reqs = append(reqs, schema.NewDispatchRequest{IdempotencyKey: fmt.Sprintf("big-%d", i), Target: "web-1", Command: "true", Priority: "normal", Env: env})
	}
	deliverAll(t, b, reqs)

	first, err := b.client.FetchPendingCommands(ctx, &mantisv1.FetchPendingCommandsRequest{InstanceId: inst, PollTargets: []string{"web-1"}, MaxCommands: 10})
	require.NoError(t, err)
	require.Equal(t, 2, len(first.GetCommands()), "the third would pass the message limit")
	require.Less(t, proto.Size(first), rpc.MaxMessageBytes)
	second, err := b.client.FetchPendingCommands(ctx, &mantisv1.FetchPendingCommandsRequest{InstanceId: inst, PollTargets: []string{"web-1"}, MaxCommands: 10})
	require.NoError(t, err)
	require.Equal(t, 1, len(second.GetCommands()), "the command handed back is claimed again")
	require.EqualValues(t, 2, second.GetCommands()[0].GetLeaseEpoch())
}

// setupSecrets serves MandibleService on a plaintext loopback server, opening secret
// env with a random codec key (returned) and resolver, with the message bounds both
// ends set in production.
func setupSecrets(t *testing.T, resolver secretenv.Resolver) (bundle, *codec.Codec) {
	t.Helper()
	pool := testenv.MigratedPool(t)
	key := make([]byte, codec.KeySize)
	_, err := rand.Read(key)
	require.NoError(t, err)
	k, err := codec.New("k1", map[string][]byte{"k1": key})
	require.NoError(t, err)
	srv := grpc.NewServer(rpc.ServerOptions()...)
	mantisv1.RegisterMandibleServiceServer(srv, &grpcapi.MandibleService{DB: pool, Logger: testLogger(), HeartbeatTimeout: time.Hour,
		Secrets: k, SecretResolver: resolver})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()), rpc.DialOption())
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return bundle{ctx: context.Background(), pool: pool, client: mantisv1.NewMandibleServiceClient(conn)}, k
}

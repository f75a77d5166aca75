package workers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/grpc"

	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

// listingClient is a Temporal client whose operator service also lists extra
// attributes as the namespace's: the server itself never maps them, as a real
// cluster's namespace cache that never catches up would not.
type listingClient struct {
	client.Client
	extra map[string]enumspb.IndexedValueType
}

func (c listingClient) OperatorService() operatorservice.OperatorServiceClient {
	return listingOperator{OperatorServiceClient: c.Client.OperatorService(), extra: c.extra}
}

// listingOperator adds extra to every ListSearchAttributes answer.
type listingOperator struct {
	operatorservice.OperatorServiceClient
	extra map[string]enumspb.IndexedValueType
}

func (o listingOperator) ListSearchAttributes(ctx context.Context, req *operatorservice.ListSearchAttributesRequest, opts ...grpc.CallOption) (*operatorservice.ListSearchAttributesResponse, error) {
	resp, err := o.OperatorServiceClient.ListSearchAttributes(ctx, req, opts...)
	if err != nil {
		return nil, err
	}
	if resp.CustomAttributes == nil {
		resp.CustomAttributes = map[string]enumspb.IndexedValueType{}
	}
	for name, typ := range o.extra {
		resp.CustomAttributes[name] = typ
	}
	return resp, nil
}

// An attribute the namespace lists but never maps is waited for no longer than
// temporal.search_attributes_wait: past it, start-up fails naming the attribute and
// the setting.
//
//mantis:temporal-server
func TestPrepareNamespaceGivesUpOnAnAttributeNeverMappedNamingIt(t *testing.T) {
	srv := testenv.TemporalServer(t)
	srv.RequireWantedKind(t)
	ctx := context.Background()
	require.NoError(t, PrepareNamespace(ctx, setupFor(t, srv, srv.Namespace, config.SearchAttributesRegister)))

	var b [4]byte
	_, _ = rand.Read(b[:])
	never := temporal.NewSearchAttributeKeyKeyword("MantisNeverMapped" + hex.EncodeToString(b[:]))
	const wait = 2 * time.Second
	s := setupFor(t, srv, srv.Namespace, config.SearchAttributesRegister)
	s.Wait = wait
	s.Keys = append(s.Keys, never)
	s.Client = listingClient{Client: s.Client, extra: map[string]enumspb.IndexedValueType{never.GetName(): never.GetValueType()}}

	began := time.Now()
	err := PrepareNamespace(ctx, s)
	elapsed := time.Since(began)
	require.Error(t, err)
	require.ErrorContains(t, err, never.GetName(), "the error names the attribute")
	require.ErrorContains(t, err, "temporal.search_attributes_wait")
	require.GreaterOrEqual(t, elapsed, wait, "it waited for the limit")
	require.Less(t, elapsed, wait+30*time.Second, "and not much longer")
}

package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/mantis-deploy/mantis/internal/identity"
	"github.com/mantis-deploy/mantis/internal/tlsconf"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

// The served Mandible guards its gRPC port by role and shows it on /metrics: the
// refusal of an agent's certificate is counted, and its own certificate's expiry
// is exported.
func TestServeGuardsGRPCAndExportsIdentityMetrics(t *testing.T) {
	t.Parallel()
	s := setupServe(t)
	s.mandible.eventually(t, "/healthz answering 200", func() bool {
		code, _ := get(s.httpURL + "/healthz")
		return code == http.StatusOK
	})

	cert, key, err := s.certs.Issue(identity.RoleAgent, "web-1", nil)
	require.NoError(t, err)
	tc, err := tlsconf.Client(tlsconf.Files{CA: s.certs.CACert(), Cert: cert, Key: key}, "localhost")
	require.NoError(t, err)
	conn, err := grpc.NewClient(s.grpcAddr, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
	require.NoError(t, err)
	defer conn.Close()
	_, err = mantisv1.NewMandibleServiceClient(conn).RegisterInstance(t.Context(), &mantisv1.RegisterInstanceRequest{Name: "impostor"})
	require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
	require.Equal(t, "thorax role required, certificate presents agent/web-1", status.Convert(err).Message())

	serverCert, _ := s.certs.Pair("mandible")
	own, err := identity.ReadCertificate(serverCert)
	require.NoError(t, err)
	expiry := fmt.Sprintf(`%s{name="mandible",role="mandible"} %g`, identity.ExpiryMetric, float64(own.NotAfter.Unix()))
	refusal := identity.RefusalsMetric + `{expected="thorax",link="mandible_grpc",presented="agent"} 1`
	s.mandible.eventually(t, "/metrics showing the refusal and the expiry", func() bool {
		code, body := get(s.httpURL + "/metrics")
		return code == http.StatusOK && strings.Contains(string(body), expiry) && strings.Contains(string(body), refusal)
	})
}

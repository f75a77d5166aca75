package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// CheckTimeout bounds each check of check-config --connect: a dependency that does
// not answer within it has failed.
const CheckTimeout = 10 * time.Second

// Lines that check-config --connect prints after a check's name.
const (
	CheckOK     = "ok"
	CheckFailed = "FAILED:"
)

// Check is one dependency that check-config --connect reaches: Run connects to it and
// returns a detail worth printing (a schema version, say), or why it failed.
type Check struct {
	Name string
	Run  func(ctx context.Context) (detail string, err error)
}

// CheckError is the error of check-config --connect: the checks that failed, by name,
// each with why.
type CheckError struct {
	Failed []string
}

// Error names every failed check and why.
func (e *CheckError) Error() string {
	return "dependency checks failed: " + strings.Join(e.Failed, "; ")
}

// runChecks runs the checks one after another, each within CheckTimeout, printing a
// line per check: "<name>: ok[ (detail)]" or "<name>: FAILED: <why>".
func runChecks(ctx context.Context, out io.Writer, checks []Check) error {
	var failed []string
	for _, c := range checks {
		cctx, cancel := context.WithTimeout(ctx, CheckTimeout)
		detail, err := c.Run(cctx)
		cancel()
		switch {
		case err != nil:
			why := strings.ReplaceAll(err.Error(), "\n", " ")
			fmt.Fprintf(out, "%s: %s %s\n", c.Name, CheckFailed, why)
			failed = append(failed, c.Name+": "+why)
		case detail != "":
			fmt.Fprintf(out, "%s: %s (%s)\n", c.Name, CheckOK, detail)
		default:
			fmt.Fprintf(out, "%s: %s\n", c.Name, CheckOK)
		}
	}
	if len(failed) > 0 {
		return &CheckError{Failed: failed}
	}
	return nil
}

// GRPCCheck is the check of a gRPC server the daemon calls: a connection over creds
// (the daemon's own TLS, checking the server's role) and a call of its health
// service.
func GRPCCheck(name, addr string, creds credentials.TransportCredentials) Check {
	return Check{Name: name, Run: func(ctx context.Context) (string, error) {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
		if err != nil {
			return "", fmt.Errorf("dialling %s: %w", addr, err)
		}
		defer conn.Close()
		resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return "", fmt.Errorf("calling the health service at %s: %w", addr, err)
		}
		if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			return "", fmt.Errorf("%s answers %s", addr, resp.GetStatus())
		}
		return addr + " serving", nil
	}}
}

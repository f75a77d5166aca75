package deploy_test

import (
	"os"
	"testing"

	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

// TestMain stops the servers a readiness test started when the run named no stack.
func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

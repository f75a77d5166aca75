package analysis_test

import (
	"os"
	"testing"

	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

package main

import (
	"testing"

	"github.com/mantis-deploy/mantis/internal/cli/clitest"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

// The built thorax binary answers --version with its version, the commit it was
// built from and the Go version, without a configuration.
func TestVersionFlagOfTheBinary(t *testing.T) {
	t.Parallel()
	clitest.RequireVersion(t, testenv.Binary(t, "thorax"), "thorax")
}

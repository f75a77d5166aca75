package sdnotify_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/sdnotify"
)

// listen binds a unixgram socket at name and returns it.
func listen(t *testing.T, name string) *net.UnixConn {
	t.Helper()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return conn
}

// receive reads one datagram from conn.
func receive(t *testing.T, conn *net.UnixConn) string {
	t.Helper()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	buf := make([]byte, 256)
	n, err := conn.Read(buf)
	require.NoError(t, err)
	return string(buf[:n])
}

func TestReadyAndStoppingReachThePathSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify.sock")
	conn := listen(t, path)
	t.Setenv(sdnotify.SocketEnv, path)

	require.NoError(t, sdnotify.Ready())
	require.Equal(t, "READY=1", receive(t, conn))
	require.NoError(t, sdnotify.Stopping())
	require.Equal(t, "STOPPING=1", receive(t, conn))
}

func TestReadyReachesAnAbstractSocket(t *testing.T) {
	name := fmt.Sprintf("@mantis-sdnotify-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	conn := listen(t, name)
	t.Setenv(sdnotify.SocketEnv, name)

	require.NoError(t, sdnotify.Ready())
	require.Equal(t, "READY=1", receive(t, conn))
}

func TestNothingHappensOutsideSystemd(t *testing.T) {
	t.Setenv(sdnotify.SocketEnv, "")
	require.NoError(t, sdnotify.Ready())
	require.NoError(t, sdnotify.Stopping())
}

func TestAMissingSocketIsAnError(t *testing.T) {
	t.Setenv(sdnotify.SocketEnv, filepath.Join(t.TempDir(), "absent.sock"))
	require.ErrorContains(t, sdnotify.Ready(), "systemd notification socket")
}

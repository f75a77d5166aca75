// Package sdnotify tells systemd how a service started with Type=notify is doing:
// one datagram to the unix socket named by $NOTIFY_SOCKET, as sd_notify(3) does.
// Outside systemd (the variable unset) every call does nothing.
package sdnotify

import (
	"fmt"
	"net"
	"os"
)

// SocketEnv is the variable in which systemd names its notification socket.
const SocketEnv = "NOTIFY_SOCKET"

// States a service reports, as sd_notify(3) spells them.
const (
	// StateReady says start-up is finished: systemd moves the unit to active.
	StateReady = "READY=1"
	// StateStopping says the service is stopping on its own (draining, say).
	StateStopping = "STOPPING=1"
)

// Ready reports StateReady. It returns nil when no socket is named.
func Ready() error { return Notify(StateReady) }

// Stopping reports StateStopping. It returns nil when no socket is named.
func Stopping() error { return Notify(StateStopping) }

// Notify sends state, one or more newline-separated VAR=value assignments, to the
// socket named by $NOTIFY_SOCKET. A name starting with '@' is in the abstract
// namespace. It returns nil when the variable is unset or empty.
func Notify(state string) error {
	name := os.Getenv(SocketEnv)
	if name == "" {
		return nil
	}
	// systemd writes an abstract-namespace socket with a leading '@', which is how
	// Go's net package spells the leading NUL byte too: the name is used as it is.
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("connecting to the systemd notification socket %s: %w", name, err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(state)); err != nil {
		return fmt.Errorf("sending %q to the systemd notification socket %s: %w", state, name, err)
	}
	return nil
}

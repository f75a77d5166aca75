package faultenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// fillerName is the file FillFilesystem writes to take every free byte.
const fillerName = ".faultenv-filler"

// MountSmallFS mounts a tmpfs of size bytes on dir (created if missing) and
// unmounts it when the test ends, after the processes started later have stopped.
// It needs root.
func MountSmallFS(t testing.TB, dir string, size int64) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatalf("faultenv: creating mount point %s: %v", dir, err)
	}
	opts := fmt.Sprintf("size=%d,mode=0700", size)
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", opts, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("faultenv: mounting a %d-byte tmpfs on %s (needs root): %v: %s", size, dir, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "--lazy", dir).CombinedOutput(); err != nil {
			t.Errorf("faultenv: unmounting %s: %v: %s", dir, err, out)
		}
	})
}

// FillFilesystem writes a file in dir until the filesystem holding it has no byte
// left, and returns a function that removes it. Files can still be created there
// (tmpfs has inodes to spare); nothing can be written to them.
func FillFilesystem(dir string) (release func() error, err error) {
	path := filepath.Join(dir, fillerName)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("creating filler in %s: %w", dir, err)
	}
	release = func() error { return os.Remove(path) }
	// Large writes first, then single bytes for the end of the last page.
	for _, size := range []int{1 << 16, 1} {
		buf := make([]byte, size)
		for {
			if _, err = f.Write(buf); err != nil {
				break
			}
		}
		if !errors.Is(err, syscall.ENOSPC) {
			f.Close()
			_ = release()
			return nil, fmt.Errorf("filling %s: %w", dir, err)
		}
	}
	if err := f.Close(); err != nil && !errors.Is(err, syscall.ENOSPC) {
		_ = release()
		return nil, fmt.Errorf("closing filler in %s: %w", dir, err)
	}
	return release, nil
}

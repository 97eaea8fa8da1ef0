package shimpy

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// TokenSocket returns the child's end of a socket pair holding token and
// nothing else, for a per-call interpreter to inherit at the fd its
// prelude names (RenderPrelude): the host's end is written and closed at
// once, so the shim reads the token, then end of file, and closes it.
// The token so never touches a file or the environment, which any process
// of the user can read; and a socket, unlike a pipe, cannot be opened
// again through /proc/<pid>/fd by another process.
func TokenSocket(token string) (*os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("bridge token socket: %w", err)
	}
	n, err := unix.Write(fds[0], []byte(token))
	_ = unix.Close(fds[0])
	if err == nil && n != len(token) {
		err = io.ErrShortWrite
	}
	if err != nil {
		_ = unix.Close(fds[1])
		return nil, fmt.Errorf("bridge token socket: %w", err)
	}
	return os.NewFile(uintptr(fds[1]), "bridge-token"), nil
}

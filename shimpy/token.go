package shimpy

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// RunConfig is what a per-call run's interpreter learns only at run
// time: the bridge token, the rpc directory and the doorbells' fds (nil:
// the shim polls). The rendered module is the same for every run of a
// runtime (RenderPrelude), so its bytecode can be made ahead; these
// values reach the shim through the socket RunSocket makes.
type RunConfig struct {
	Token string
	Dir   string
	Bells *Bells
}

// ErrRunConfig: a RunConfig the shim would refuse; no socket is made.
var ErrRunConfig = errors.New("invalid run configuration")

// runMagic opens an encoded RunConfig and names the protocol version; the
// shim refuses any other.
var runMagic = fmt.Sprintf("exec_tools run %d", ProtocolVersion)

// The bounds the shim holds a RunConfig to (the template's
// _RUN_CONFIG_MAX, _TOKEN_MAX and _PATH_MAX): a directory of PATH_MAX and
// a token with room to spare.
const (
	maxRunConfig = 8192
	maxRunToken  = 256
	maxRunDir    = 4096
)

// isBellFD: a bell is neither fd 0, 1 nor 2, and at most six digits,
// as the shim checks.
func isBellFD(fd int) bool { return fd >= 3 && fd <= 999999 }

// isTokenChar: a token is base64url (pump.NewToken), which the shim checks.
func isTokenChar(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_'
}

// encode renders c as the shim reads it: four fields, each ended by a
// NUL (no path, token or fd list holds one): the magic, the token, the
// directory and the bells as "REQUEST,RESPONSE" or empty. The last NUL
// tells a whole configuration from a cut one.
func (c RunConfig) encode() ([]byte, error) {
	bells := ""
	if c.Bells != nil {
		if !isBellFD(c.Bells.Request) || !isBellFD(c.Bells.Response) || c.Bells.Request == c.Bells.Response {
			return nil, fmt.Errorf("%w: bells %d and %d", ErrRunConfig, c.Bells.Request, c.Bells.Response)
		}
		bells = fmt.Sprintf("%d,%d", c.Bells.Request, c.Bells.Response)
	}
	switch {
	case c.Token == "" || len(c.Token) > maxRunToken || strings.IndexFunc(c.Token, func(r rune) bool { return !isTokenChar(r) }) >= 0:
		return nil, fmt.Errorf("%w: the token is not 1 to %d base64url characters", ErrRunConfig, maxRunToken)
	case !strings.HasPrefix(c.Dir, "/") || len(c.Dir) > maxRunDir || strings.IndexByte(c.Dir, 0) >= 0:
		return nil, fmt.Errorf("%w: rpc dir %q is not an absolute path of at most %d bytes", ErrRunConfig, c.Dir, maxRunDir)
	}
	return []byte(runMagic + "\x00" + c.Token + "\x00" + c.Dir + "\x00" + bells + "\x00"), nil
}

// RunSocket returns the child's end of a socket pair holding cfg and
// nothing else, for a per-call interpreter to inherit at the fd its
// prelude names (RenderPrelude): the host's end is written and closed at
// once, so the shim reads the configuration, then end of file, and closes
// it. The token so never touches a file, the environment or the module,
// which any process of the user can read; and a socket, unlike a pipe,
// cannot be opened again through /proc/<pid>/fd by another process.
func RunSocket(cfg RunConfig) (*os.File, error) {
	b, err := cfg.encode()
	if err != nil {
		return nil, err
	}
	return socketHolding(b)
}

// socketHolding is the child's end of a socket pair whose host end wrote
// b and was closed.
func socketHolding(b []byte) (*os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("run socket: %w", err)
	}
	n, err := unix.Write(fds[0], b)
	_ = unix.Close(fds[0])
	if err == nil && n != len(b) {
		err = io.ErrShortWrite
	}
	if err != nil {
		_ = unix.Close(fds[1])
		return nil, fmt.Errorf("run socket: %w", err)
	}
	return os.NewFile(uintptr(fds[1]), "run-config"), nil
}

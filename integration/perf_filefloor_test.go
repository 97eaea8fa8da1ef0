package integration

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// fileFloorScript is the least a helper call of the file contract can
// cost (docs/protocol.md): python publishes a request file (created
// exclusively, written, renamed into place) and rings, the host reads
// it, claims it by a rename, publishes the answer the same way and rings
// back, and python reads and removes the answer. No MAC, JSON, ledger,
// dispatch or tool: what is left of a helper call against this floor is
// the runtime's own work. Timed inside python, as the helper call is;
// prints the median in ns.
const fileFloorScript = `import os, sys, time
d, n = sys.argv[1], int(sys.argv[2])
body = b'{"id": 1, "tool": "read", "params": {"path": "small.txt"}}'
ts = []
for i in range(n):
    t0 = time.perf_counter_ns()
    tmp = os.path.join(d, '.req-%d' % i)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, body)
    os.close(fd)
    os.rename(tmp, os.path.join(d, 'req-%d.json' % i))
    os.write(3, b'x')
    os.read(4, 1)
    res = os.path.join(d, 'res-%d.json' % i)
    fd = os.open(res, os.O_RDONLY)
    os.read(fd, 65536)
    os.close(fd)
    os.unlink(res)
    ts.append(time.perf_counter_ns() - t0)
ts.sort()
print(ts[len(ts) // 2])
`

// fileFloorTrips is how many calls one file floor times.
const fileFloorTrips = 1000

// measureFileFloor runs fileFloorScript on python in a directory of
// staging (where a bridge lives) and answers its calls here, and returns
// the median round trip in µs.
func measureFileFloor(b *testing.B, python, staging string) float64 {
	b.Helper()
	dir, err := os.MkdirTemp(staging, "file-floor-")
	require.NoError(b, err)
	defer os.RemoveAll(dir)
	ringR, ringW, err := os.Pipe()
	require.NoError(b, err)
	backR, backW, err := os.Pipe()
	require.NoError(b, err)
	cmd := exec.Command(python, "-I", "-S", "-c", fileFloorScript, dir, strconv.Itoa(fileFloorTrips))
	cmd.ExtraFiles = []*os.File{ringW, backR} // fds 3 and 4
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(b, cmd.Start())
	_ = ringW.Close()
	_ = backR.Close()
	served := make(chan error, 1)
	go func() { served <- serveFileFloor(dir, ringR, backW) }()
	err = cmd.Wait()
	_ = backW.Close()
	require.NoError(b, <-served)
	_ = ringR.Close()
	require.NoError(b, err, out.String())
	ns, err := strconv.ParseFloat(strings.TrimSpace(out.String()), 64)
	require.NoError(b, err, out.String())
	return ns / 1000
}

// serveFileFloor is the host's side of fileFloorScript, until python
// closes its ring.
func serveFileFloor(dir string, ring io.Reader, back io.Writer) error {
	answer := []byte(`{"id": 1, "content": "hello\nworld\n"}`)
	buf := make([]byte, 65536)
	one := make([]byte, 1)
	for i := 0; ; i++ {
		if _, err := ring.Read(one); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		name := filepath.Join(dir, "req-"+strconv.Itoa(i)+".json")
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		_, err = f.Read(buf)
		_ = f.Close()
		if err != nil {
			return err
		}
		claim := filepath.Join(dir, "req-"+strconv.Itoa(i)+".claim")
		if err := os.Rename(name, claim); err != nil {
			return err
		}
		tmp := filepath.Join(dir, ".res-"+strconv.Itoa(i))
		f, err = os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		_, err = f.Write(answer)
		_ = f.Close()
		if err != nil {
			return err
		}
		if err := os.Rename(tmp, filepath.Join(dir, "res-"+strconv.Itoa(i)+".json")); err != nil {
			return err
		}
		if _, err := back.Write(one); err != nil {
			return err
		}
		if err := os.Remove(claim); err != nil {
			return err
		}
	}
}

package shimpy

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/internal/proctest"
)

// framePrefix starts every frame the runner writes (docs/protocol.md,
// Frames).
const framePrefix = "\x1elemon-python\t"

// frameCap is the largest frame line the host parser accepts.
const frameCap = 256 << 10

// frameWait bounds every wait for a frame, so a broken runner fails the
// test instead of hanging it.
const frameWait = 30 * time.Second

// frame is one decoded runner frame; bad is set for a line the host
// parser would reject (it then holds the reason).
type frame struct {
	V         int     `json:"v"`
	Type      string  `json:"type"`
	ID        string  `json:"id"`
	PID       *int    `json:"pid"`
	Stream    string  `json:"stream"`
	Data      string  `json:"data"`
	Kind      string  `json:"kind"`
	Name      string  `json:"name"`
	Message   *string `json:"message"`
	Traceback *string `json:"traceback"`
	Reason    *string `json:"reason"`
	Dropped   *int    `json:"dropped"`
	size      int
	bad       string
}

// kernel is a runner started the way kernelworker starts one: python3 -u
// runner.py in a workspace holding the unconfigured shim, requests on
// fd 0, frames on fd 1, optional doorbells as fds 3 and 4.
type kernel struct {
	workspace string
	cwd       string // the init cwd
	cmd       *exec.Cmd
	stdin     *os.File
	bells     *bellPipes
	frames    chan frame
	readDone  chan struct{}
	exited    chan struct{}
	stop      chan struct{}
	stderr    string
	closeOnce sync.Once
}

type kernelOptions struct {
	tools []string
	bells bool
}

func startKernel(t testing.TB, opts kernelOptions) *kernel {
	t.Helper()
	python := proctest.Python(t)
	workspace := t.TempDir()
	require.NoError(t, os.Chmod(workspace, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(workspace, RunnerName), []byte(Runner()), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(workspace, ModuleName+".py"), []byte(RenderModule(opts.tools, 65536)), 0o600))
	logs := t.TempDir()
	k := &kernel{
		workspace: workspace,
		cwd:       t.TempDir(),
		frames:    make(chan frame, 1024),
		readDone:  make(chan struct{}),
		exited:    make(chan struct{}),
		stop:      make(chan struct{}),
		stderr:    filepath.Join(logs, "stderr"),
	}
	inRead, inWrite, err := os.Pipe()
	require.NoError(t, err)
	outRead, outWrite, err := os.Pipe()
	require.NoError(t, err)
	errFile, err := os.Create(k.stderr)
	require.NoError(t, err)

	k.cmd = exec.Command(python, "-u", RunnerName)
	k.cmd.Dir = workspace
	k.cmd.Env = pythonEnv()
	k.cmd.Stdin = inRead
	k.cmd.Stdout = outWrite
	k.cmd.Stderr = errFile
	if opts.bells {
		k.bells = newBellPipes(t)
		k.cmd.ExtraFiles = k.bells.ChildFiles()
	}
	startErr := k.cmd.Start()
	for _, f := range []*os.File{inRead, outWrite, errFile} {
		_ = f.Close()
	}
	if k.bells != nil {
		k.bells.releaseChildEnds()
	}
	if startErr != nil {
		_ = inWrite.Close()
		_ = outRead.Close()
		require.NoError(t, startErr)
	}
	k.stdin = inWrite
	go k.read(outRead)
	go func() {
		_ = k.cmd.Wait()
		close(k.exited)
	}()
	t.Cleanup(func() {
		k.close()
		if t.Failed() {
			if b, err := os.ReadFile(k.stderr); err == nil && len(b) > 0 {
				t.Logf("runner stderr:\n%s", b)
			}
		}
	})
	return k
}

// close kills the runner and reaps it and the frame reader; idempotent.
func (k *kernel) close() {
	k.closeOnce.Do(func() {
		k.kill()
		<-k.exited
		close(k.stop)
		<-k.readDone
		_ = k.stdin.Close()
	})
}

// kill ends the runner's whole process group (it made itself a session
// leader), so nothing a cell started outlives the test.
func (k *kernel) kill() {
	pid := k.cmd.Process.Pid
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	_ = k.cmd.Process.Kill()
}

// read splits the control stream into frames, as the host parser does,
// marking whatever that parser would refuse.
func (k *kernel) read(r *os.File) {
	defer close(k.readDone)
	defer func() { _ = r.Close() }()
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			f := decodeFrame(line)
			select {
			case k.frames <- f:
			case <-k.stop:
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func decodeFrame(line []byte) frame {
	f := frame{size: len(line)}
	body, ok := bytes.CutSuffix(line, []byte("\n"))
	switch {
	case !ok:
		f.bad = fmt.Sprintf("unterminated frame %q", line)
	case len(body) > frameCap:
		f.bad = fmt.Sprintf("frame of %d bytes", len(body))
	case !bytes.HasPrefix(body, []byte(framePrefix)):
		f.bad = fmt.Sprintf("bad prefix %q", body)
	default:
		payload := body[len(framePrefix):]
		for _, c := range payload {
			if c >= 0x80 || c < 0x20 {
				f.bad = fmt.Sprintf("non-ASCII or control byte in %q", payload)
				return f
			}
		}
		if err := json.Unmarshal(payload, &f); err != nil {
			f.bad = fmt.Sprintf("invalid JSON %q: %v", payload, err)
		} else if f.V != 1 {
			f.bad = fmt.Sprintf("version %d", f.V)
		}
	}
	return f
}

// next returns the next frame; it fails the test on a malformed one.
func (k *kernel) next(t testing.TB) frame {
	t.Helper()
	select {
	case f, ok := <-k.frames:
		if !ok {
			t.Fatal("control stream closed")
		}
		require.Empty(t, f.bad, "malformed frame")
		return f
	case <-k.readDone:
		select {
		case f := <-k.frames:
			require.Empty(t, f.bad, "malformed frame")
			return f
		default:
		}
		t.Fatal("control stream ended")
	case <-time.After(frameWait):
		t.Fatal("no frame from the runner")
	}
	return frame{}
}

// rest returns every frame until the control stream ends.
func (k *kernel) rest(t testing.TB) []frame {
	t.Helper()
	var out []frame
	deadline := time.After(frameWait)
	for {
		select {
		case f := <-k.frames:
			out = append(out, f)
		case <-k.readDone:
			for {
				select {
				case f := <-k.frames:
					out = append(out, f)
				default:
					return out
				}
			}
		case <-deadline:
			t.Fatal("control stream never ended")
		}
	}
}

func (k *kernel) send(t testing.TB, request any) {
	t.Helper()
	line, err := json.Marshal(request)
	require.NoError(t, err)
	k.sendRaw(t, string(line)+"\n")
}

func (k *kernel) sendRaw(t testing.TB, raw string) {
	t.Helper()
	_, err := io.WriteString(k.stdin, raw)
	require.NoError(t, err)
}

// exitCode waits for the runner to exit on its own.
func (k *kernel) exitCode(t testing.TB) int {
	t.Helper()
	select {
	case <-k.exited:
	case <-time.After(frameWait):
		t.Fatal("runner did not exit")
	}
	return k.cmd.ProcessState.ExitCode()
}

// init sends init with the kernel's cwd and checks the ready answer.
func (k *kernel) init(t testing.TB) frame {
	t.Helper()
	k.send(t, map[string]any{"v": 1, "type": "init", "cwd": k.cwd})
	f := k.next(t)
	require.Equal(t, "ready", f.Type)
	return f
}

// bridge is the eval request's bridge object.
type bridge struct {
	Dir          string `json:"dir"`
	Token        string `json:"token"`
	MaxTextBytes int    `json:"max_text_bytes,omitempty"`
}

// cellResult is everything one cell produced, between started and done.
type cellResult struct {
	frames     []frame
	stdout     string
	stderr     string
	exceptions []frame
	done       frame
}

func (c cellResult) exception(t testing.TB) frame {
	t.Helper()
	require.Len(t, c.exceptions, 1, "stdout %q stderr %q", c.stdout, c.stderr)
	return c.exceptions[0]
}

// eval runs one cell; extra fields (cwd, bridge) are merged into the
// request.
func (k *kernel) eval(t testing.TB, id, code string, extra map[string]any) cellResult {
	t.Helper()
	k.startCell(t, id, code, extra)
	return k.finishCell(t, id)
}

func (k *kernel) startCell(t testing.TB, id, code string, extra map[string]any) {
	t.Helper()
	request := map[string]any{"v": 1, "type": "eval", "id": id, "code": code}
	for key, value := range extra {
		request[key] = value
	}
	k.send(t, request)
	f := k.next(t)
	require.Equal(t, "started", f.Type, "first frame of a cell")
	require.Equal(t, id, f.ID)
}

// finishCell collects a started cell's frames up to its done, checking
// that each belongs to the cell and every stream chunk is well formed.
func (k *kernel) finishCell(t testing.TB, id string) cellResult {
	t.Helper()
	var res cellResult
	var stdout, stderr strings.Builder
	for {
		f := k.next(t)
		res.frames = append(res.frames, f)
		require.Equal(t, id, f.ID, "frame %s of another cell", f.Type)
		switch f.Type {
		case "stream":
			chunk := decodeChunk(t, f)
			switch f.Stream {
			case "stdout":
				stdout.Write(chunk)
			case "stderr":
				stderr.Write(chunk)
			default:
				t.Fatalf("stream %q", f.Stream)
			}
		case "exception":
			assert.Contains(t, []string{"error", "system_exit", "unsupported_input", "interrupted"}, f.Kind)
			assert.NotEmpty(t, f.Name)
			res.exceptions = append(res.exceptions, f)
		case "done":
			res.done = f
			res.stdout, res.stderr = stdout.String(), stderr.String()
			require.NotNil(t, f.Dropped, "done reports the dropped byte count")
			return res
		default:
			t.Fatalf("unexpected %s frame inside a cell", f.Type)
		}
	}
}

// decodeChunk decodes a stream frame's payload strictly: standard base64
// with padding, no whitespace, non-empty, at most 64 KiB.
func decodeChunk(t testing.TB, f frame) []byte {
	t.Helper()
	require.NotEmpty(t, f.Data)
	require.NotContains(t, f.Data, "\n")
	chunk, err := base64.StdEncoding.Strict().DecodeString(f.Data)
	require.NoError(t, err)
	require.LessOrEqual(t, len(chunk), 65536, "stream chunk over 64 KiB")
	return chunk
}

// newBridgeDir makes an owner-only rpc directory for one cell.
func newBridgeDir(t testing.TB, name string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.Mkdir(dir, 0o700))
	return dir
}

// waitForFile polls until path exists.
func waitForFile(t testing.TB, path string) {
	t.Helper()
	deadline := time.Now().Add(frameWait)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		} else if !errors.Is(err, os.ErrNotExist) {
			require.NoError(t, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", path)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// mustEvalSymlinks is path as os.getcwd() in python reports it.
func mustEvalSymlinks(t testing.TB, path string) string {
	t.Helper()
	real, err := filepath.EvalSymlinks(path)
	require.NoError(t, err)
	return real
}

// pyString renders s as a python string literal.
func pyString(s string) string { return quote(s) }

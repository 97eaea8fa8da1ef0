package shimpy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/internal/proctest"
	"github.com/executecode/executecode/pump"
)

// testToken looks like a real bridge token (43 base64url characters).
const testToken = "tok_ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmn0"

// knownTokens are the tokens the tests' bridges use: a frame or request
// is attributed to the first one its MAC verifies under.
var knownTokens = []string{testToken, "t1", "t2"}

// tokenOf returns the known token that authenticates a file of kind
// numbered num with body under mac, or "" when none does.
func tokenOf(kind, num string, body []byte, mac string) string {
	for _, tok := range knownTokens {
		if pump.FrameMAC(tok, kind, num, body) == mac {
			return tok
		}
	}
	return ""
}

var allTools = []string{"read", "grep", "find", "ls", "webfetch"}

// stage is one staged run: a workspace holding exec_tools.py and an rpc
// directory, laid out like a per-call workspace.
type stage struct {
	work  string
	rpc   string
	token string
	tools []string
	// tokenFD, when set, is where the configured prelude reads its run's
	// configuration: start hands every run a fresh socket holding the
	// token, rpc and bells there, or runConfig when it is set.
	tokenFD   int
	bells     *Bells
	runConfig []byte
}

// newStage writes a configured prelude (per-call shape): the run's
// configuration comes at fd 3, or after the bells.
func newStage(t testing.TB, tools []string, maxTextBytes int, bells *Bells) *stage {
	t.Helper()
	s := newBareStage(t, tools)
	s.tokenFD = 3
	if bells != nil {
		s.tokenFD = max(bells.Request, bells.Response) + 1
	}
	s.bells = bells
	s.writeModule(t, RenderPrelude(RenderModule(tools, maxTextBytes), s.tokenFD))
	return s
}

// newUnconfiguredStage writes the session-shaped module (_BRIDGE = None).
func newUnconfiguredStage(t testing.TB, tools []string, maxTextBytes int) *stage {
	t.Helper()
	s := newBareStage(t, tools)
	s.writeModule(t, RenderModule(tools, maxTextBytes))
	return s
}

func newBareStage(t testing.TB, tools []string) *stage {
	t.Helper()
	work := t.TempDir()
	require.NoError(t, os.Chmod(work, 0o700))
	rpc := filepath.Join(work, "rpc-0123456789")
	require.NoError(t, os.Mkdir(rpc, 0o700))
	return &stage{work: work, rpc: rpc, token: testToken, tools: tools}
}

// newRPCDir makes another 0700 rpc directory inside the workspace.
func (s *stage) newRPCDir(t testing.TB, name string) string {
	t.Helper()
	dir := filepath.Join(s.work, name)
	require.NoError(t, os.Mkdir(dir, 0o700))
	return dir
}

func (s *stage) writeModule(t testing.TB, text string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(s.work, ModuleName+".py"), []byte(text), 0o600))
}

// outcome is what a finished python run left behind.
type outcome struct {
	output string // stdout and stderr merged in one pipe
	exit   int
}

// proc is a started python run.
type proc struct {
	cmd    *exec.Cmd
	out    *bytes.Buffer
	cancel context.CancelFunc
}

// start runs script.py (the script with the injected import line) with
// stdout and stderr merged; extra become fds 3, 4, … in the child.
func (s *stage) start(t testing.TB, script string, extra ...*os.File) *proc {
	t.Helper()
	python := proctest.Python(t)
	require.NoError(t, os.WriteFile(filepath.Join(s.work, "script.py"), []byte(RenderScript(script, s.tools)), 0o600))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	cmd := exec.CommandContext(ctx, python, "-B", "-E", "-s", "script.py")
	cmd.Dir = s.work
	cmd.Env = pythonEnv()
	cmd.WaitDelay = 5 * time.Second
	cmd.ExtraFiles = extra
	var tokenFile *os.File
	if s.tokenFD > 0 {
		var err error
		if s.runConfig != nil {
			tokenFile, err = socketHolding(s.runConfig)
		} else {
			tokenFile, err = RunSocket(RunConfig{Token: s.token, Dir: s.rpc, Bells: s.bells})
		}
		require.NoError(t, err)
		defer tokenFile.Close()
		for len(cmd.ExtraFiles) < s.tokenFD-3 {
			cmd.ExtraFiles = append(cmd.ExtraFiles, nil)
		}
		cmd.ExtraFiles = append(cmd.ExtraFiles[:s.tokenFD-3:s.tokenFD-3], tokenFile)
	}
	out := &bytes.Buffer{}
	cmd.Stdout = out
	cmd.Stderr = out
	if err := cmd.Start(); err != nil {
		cancel()
		require.NoError(t, err)
	}
	p := &proc{cmd: cmd, out: out, cancel: cancel}
	// A test that fails half-way must not leave a python waiting forever.
	t.Cleanup(func() {
		p.cancel()
		p.wait()
	})
	return p
}

// wait reaps the process (idempotent) and reports how it ended.
func (p *proc) wait() outcome {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Wait()
		p.cancel()
	}
	return outcome{output: p.out.String(), exit: p.cmd.ProcessState.ExitCode()}
}

// run runs script.py to completion.
func (s *stage) run(t testing.TB, script string, extra ...*os.File) outcome {
	t.Helper()
	return s.start(t, script, extra...).wait()
}

// pythonEnv is the caller's environment without PYTHON* variables, so a
// developer's PYTHONUNBUFFERED or PYTHONSTARTUP cannot change the result.
func pythonEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PYTHON") {
			env = append(env, kv)
		}
	}
	return env
}

// requireClean asserts the run exited 0 and returns its output.
func requireClean(t testing.TB, o outcome) string {
	t.Helper()
	require.Equal(t, 0, o.exit, "python failed:\n%s", o.output)
	return o.output
}

// lastJSONLine decodes the last line of the output into v.
func lastJSONLine(t testing.TB, output string, v any) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(output, "\n"), "\n")
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), v), "output:\n%s", output)
}

// listDir returns the sorted names in dir.
func listDir(t testing.TB, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

var frameName = regexp.MustCompile(`^(text|notify)-(\d+)-([0-9a-f]{32})\.json$`)

// frames returns the bodies of the kind's frames ("text" or "notify"),
// ordered by n. Each must be authenticated with a known token.
func frames(t testing.TB, dir, kind string) [][]byte {
	t.Helper()
	type numbered struct {
		n    int
		body []byte
	}
	var found []numbered
	for _, name := range listDir(t, dir) {
		m := frameName.FindStringSubmatch(name)
		if m == nil || m[1] != kind {
			continue
		}
		n, err := strconv.Atoi(m[2])
		require.NoError(t, err)
		body, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		require.NotEmpty(t, tokenOf(kind, m[2], body, m[3]), "frame %s is not authenticated", name)
		found = append(found, numbered{n, body})
	}
	sort.Slice(found, func(i, j int) bool { return found[i].n < found[j].n })
	out := make([][]byte, len(found))
	for i, f := range found {
		out[i] = f.body
	}
	return out
}

// bellPipes are both doorbells of one run. The child gets ChildFiles as
// fds 3 (request bell, write end) and 4 (response bell, read end).
type bellPipes struct {
	requestRead, requestWrite   *os.File
	responseRead, responseWrite *os.File
	rings                       atomic.Int64
	drained                     chan struct{}
	// rung is every byte the shim rang, read once drained is closed.
	rung []byte
}

func newBellPipes(t testing.TB) *bellPipes {
	t.Helper()
	b := &bellPipes{drained: make(chan struct{})}
	var err error
	b.requestRead, b.requestWrite, err = os.Pipe()
	require.NoError(t, err)
	b.responseRead, b.responseWrite, err = os.Pipe()
	require.NoError(t, err)
	go b.countRings()
	t.Cleanup(func() {
		_ = b.requestRead.Close()
		<-b.drained
		_ = b.requestWrite.Close()
		_ = b.responseRead.Close()
		_ = b.responseWrite.Close()
	})
	return b
}

// ChildFiles are the ExtraFiles of the python child.
func (b *bellPipes) ChildFiles() []*os.File { return []*os.File{b.requestWrite, b.responseRead} }

// releaseChildEnds closes the parent's copies of the child's ends once the
// child holds them, so the request bell reads EOF when the child exits.
func (b *bellPipes) releaseChildEnds() {
	_ = b.requestWrite.Close()
	_ = b.responseRead.Close()
}

func (b *bellPipes) countRings() {
	defer close(b.drained)
	buf := make([]byte, 512)
	for {
		n, err := b.requestRead.Read(buf)
		b.rings.Add(int64(n))
		b.rung = append(b.rung, buf[:n]...)
		if err != nil {
			return
		}
	}
}

// ringsAfterExit waits until the child's end is closed everywhere and
// returns how many bytes the shim rang in total.
func (b *bellPipes) ringsAfterExit(t testing.TB) int64 {
	t.Helper()
	b.waitDrained(t)
	return b.rings.Load()
}

// rungAfterExit waits as ringsAfterExit and returns the bytes rung.
func (b *bellPipes) rungAfterExit(t testing.TB) []byte {
	t.Helper()
	b.waitDrained(t)
	return b.rung
}

func (b *bellPipes) waitDrained(t testing.TB) {
	t.Helper()
	select {
	case <-b.drained:
	case <-time.After(10 * time.Second):
		t.Fatal("request bell never reached EOF")
	}
}

// request is a request file as the responder read it.
type request struct {
	ID     int             `json:"id"`
	Tool   string          `json:"tool"`
	Params json.RawMessage `json:"params"`
	// Token is the known token the name's MAC authenticates the body
	// under, "" for none; BodyToken a "token" member of the body, which
	// the shim must never write.
	Token     string `json:"-"`
	BodyToken any    `json:"token"`
	file      int    // id from the file name
	name      string // the file name it was published under
}

// responder is a minimal host: it picks up published requests and lets
// the test answer them, ringing the response bell when it has one.
type responder struct {
	dir      string
	ring     *os.File // nil: never ring
	ids      bool     // ring with the answered id and a newline
	requests chan request
	stop     context.CancelFunc
	done     chan struct{}
	// keys are the tokens requests were authenticated with, by id: an
	// answer is authenticated with its request's.
	mu   sync.Mutex
	keys map[int]string
}

var requestName = regexp.MustCompile(`^req-(-?\d+)-([0-9a-f]{32})\.json$`)

func startResponder(t testing.TB, dir string, ring *os.File) *responder {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	r := &responder{dir: dir, ring: ring, requests: make(chan request, 256), stop: stop, done: make(chan struct{}), keys: map[int]string{}}
	go r.scan(ctx)
	t.Cleanup(func() {
		r.stop()
		<-r.done
	})
	return r
}

func (r *responder) scan(ctx context.Context) {
	defer close(r.done)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		entries, err := os.ReadDir(r.dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			m := requestName.FindStringSubmatch(e.Name())
			if m == nil {
				continue
			}
			path := filepath.Join(r.dir, e.Name())
			body, err := os.ReadFile(path)
			if err != nil {
				continue
			}
			var req request
			if json.Unmarshal(body, &req) != nil {
				req = request{}
			}
			req.file, _ = strconv.Atoi(m[1])
			req.name = e.Name()
			req.Token = tokenOf(pump.KindRequest, m[1], body, m[2])
			r.mu.Lock()
			r.keys[req.file] = req.Token
			r.mu.Unlock()
			// Claimed: the request leaves the directory, as the pump's
			// marker rename does.
			_ = os.Rename(path, filepath.Join(r.dir, fmt.Sprintf("req-%d.claim", req.file)))
			select {
			case r.requests <- req:
			case <-ctx.Done():
				return
			}
		}
	}
}

// next returns the next published request.
func (r *responder) next(t testing.TB) request {
	t.Helper()
	select {
	case req := <-r.requests:
		return req
	case <-time.After(20 * time.Second):
		t.Fatal("no request arrived")
		return request{}
	}
}

// answer publishes res-<id>.json (write a private temp, rename) and rings,
// authenticated as the pump authenticates it: with the token of id's
// request (the test token when there was none), as a leading "mac"
// member over the body without it. body is any JSON object, or raw bytes
// starting with "{".
func (r *responder) answer(t testing.TB, id int, body any) {
	t.Helper()
	r.mu.Lock()
	key, ok := r.keys[id]
	r.mu.Unlock()
	if !ok || key == "" {
		key = testToken
	}
	r.publish(t, id, authenticate(t, key, id, body))
}

// authenticate renders body as the pump's authenticated answer to id.
func authenticate(t testing.TB, token string, id int, body any) []byte {
	t.Helper()
	raw, ok := body.([]byte)
	if !ok {
		var err error
		raw, err = json.Marshal(body)
		require.NoError(t, err)
	}
	return authenticateBytes(token, id, raw)
}

// authenticateBytes is authenticate for a body already encoded. The shim
// reads the body as "{" and what follows the MAC member.
func authenticateBytes(token string, id int, raw []byte) []byte {
	rest := raw
	if len(raw) > 0 && raw[0] == '{' {
		rest = raw[1:]
	}
	mac := pump.FrameMAC(token, pump.KindResponse, strconv.Itoa(id), append([]byte{'{'}, rest...))
	return append([]byte(`{"mac":"`+mac+`",`), rest...)
}

var macInName = regexp.MustCompile(`-[0-9a-f]{32}\.json$`)

// withoutMACs is names with each frame's MAC taken out of its name:
// text-1-<mac>.json reads text-1.json.
func withoutMACs(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = macInName.ReplaceAllString(n, ".json")
	}
	return out
}

// frameFile is the path of the one file in dir whose name without its MAC
// is name.
func frameFile(t testing.TB, dir, name string) string {
	t.Helper()
	for _, n := range listDir(t, dir) {
		if macInName.ReplaceAllString(n, ".json") == name {
			return filepath.Join(dir, n)
		}
	}
	t.Fatalf("no %s in %s", name, dir)
	return ""
}

// publish renames raw into place as res-<id>.json and rings.
func (r *responder) publish(t testing.TB, id int, raw []byte) {
	t.Helper()
	tmp := filepath.Join(r.dir, fmt.Sprintf(".res-%d--test", id))
	require.NoError(t, os.WriteFile(tmp, raw, 0o600))
	require.NoError(t, os.Rename(tmp, filepath.Join(r.dir, fmt.Sprintf("res-%d.json", id))))
	if r.ring != nil {
		ring := []byte{1}
		if r.ids {
			ring = []byte(fmt.Sprintf("%d\n", id))
		}
		if _, err := r.ring.Write(ring); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			require.NoError(t, err)
		}
	}
}

func okResponse(id int, content string) map[string]any {
	return map[string]any{"id": id, "ok": true, "content": content}
}

func errResponse(id int, msg string) map[string]any {
	return map[string]any{"id": id, "ok": false, "error": msg}
}

// runPlain runs a python file that does not import the shim, with stdout
// and stderr merged, and returns the output.
func runPlain(t testing.TB, python, dir, file string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-B", "-E", "-s", file)
	cmd.Dir = dir
	cmd.Env = pythonEnv()
	cmd.WaitDelay = 5 * time.Second
	out := &bytes.Buffer{}
	cmd.Stdout = out
	cmd.Stderr = out
	_ = cmd.Run()
	return out.String()
}

package pump

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/tools"
)

// funcTool is a test tool: a name, a body and a run counter.
type funcTool struct {
	name string
	fn   func(ctx context.Context, params map[string]any) (tools.Result, error)
	runs atomic.Int64
}

func (t *funcTool) Name() string { return t.name }

func (t *funcTool) Execute(ctx context.Context, params map[string]any) (tools.Result, error) {
	t.runs.Add(1)
	return t.fn(ctx, params)
}

// echoTool answers params["text"] (or "ok").
func echoTool(name string) *funcTool {
	return &funcTool{name: name, fn: func(_ context.Context, p map[string]any) (tools.Result, error) {
		if s, ok := p["text"].(string); ok {
			return tools.TextResult(s), nil
		}
		return tools.TextResult("ok"), nil
	}}
}

// sizeTool answers params["n"] bytes of "x".
func sizeTool(name string, untrusted bool) *funcTool {
	return &funcTool{name: name, fn: func(_ context.Context, p map[string]any) (tools.Result, error) {
		n, _ := p["n"].(float64)
		r := tools.TextResult(strings.Repeat("x", int(n)))
		r.Untrusted = untrusted
		return r, nil
	}}
}

// blocker is a tool whose calls report their start and wait for a release
// (or their context's end).
type blocker struct {
	funcTool
	started chan int64
	release chan struct{}
	// perID, when set, releases calls one by one instead of release.
	perID    map[int64]chan struct{}
	mu       sync.Mutex
	events   []string
	canceled atomic.Int64
}

func newBlocker(name string) *blocker {
	b := &blocker{started: make(chan int64, 64), release: make(chan struct{})}
	b.name = name
	b.fn = func(ctx context.Context, p map[string]any) (tools.Result, error) {
		id := int64(p["id"].(float64))
		b.log("start %d", id)
		b.started <- id
		release := b.release
		if ch, ok := b.perID[id]; ok {
			release = ch
		}
		select {
		case <-release:
		case <-ctx.Done():
			b.canceled.Add(1)
			return tools.Result{}, ctx.Err()
		}
		b.log("end %d", id)
		return tools.TextResult(fmt.Sprintf("done %d", id)), nil
	}
	return b
}

func (b *blocker) log(format string, a ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.events = append(b.events, fmt.Sprintf(format, a...))
}

func (b *blocker) Events() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.events...)
}

// waitStart receives the next start, failing the test after a generous
// guard (a hang guard, not a timing assertion).
func (b *blocker) waitStart(t *testing.T) int64 {
	t.Helper()
	select {
	case id := <-b.started:
		return id
	case <-time.After(10 * time.Second):
		t.Fatal("tool never started")
		return 0
	}
}

// harness is one private rpc directory with a token and a pump config.
type harness struct {
	t     *testing.T
	dir   string
	token string
	cfg   Config
	stats Stats
	// hooks reach the servers the harness starts, and (unlink) its lone
	// sweeps; bridge is what its lone sweeps share.
	hooks  hooks
	bridge bridge
	// reqNames are the names requests were last published under, by id,
	// guarded by namesMu: a server's sweep reads them through a test's
	// observer, and only the file system orders that read after the write.
	namesMu  sync.Mutex
	reqNames map[int64]string
}

func newHarness(t *testing.T, ts ...tools.Tool) *harness {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "rpc-test")
	require.NoError(t, os.Mkdir(dir, 0o700))
	token, err := NewToken()
	require.NoError(t, err)
	m := map[string]tools.Tool{}
	for _, tl := range ts {
		m[tl.Name()] = tl
	}
	return &harness{
		t: t, dir: dir, token: token, stats: newStats(), reqNames: map[int64]string{},
		cfg: Config{Dir: dir, Token: token, Tools: m, MaxCalls: 100, MaxResultBytes: 5 << 20},
	}
}

// keepLedger records the harness's claims in a ledger its sweeps consult,
// as a Server's live ledger is.
func (h *harness) keepLedger() {
	ledger, mu := claimLedger{}, &sync.Mutex{}
	h.cfg.onClaim = func(id int64, kind claimKind, tool string) {
		mu.Lock()
		defer mu.Unlock()
		ledger.Record(id, kind, tool)
	}
	h.bridge.claimed = func(id int64) (string, bool) {
		mu.Lock()
		defer mu.Unlock()
		e, ok := ledger[id]
		return e.Tool, ok && e.Kind == claimClaimed
	}
}

// publish writes a file the way a script does: a temp file renamed onto
// the final name.
func (h *harness) publish(name string, body []byte) {
	h.t.Helper()
	tmp := filepath.Join(h.dir, name+".tmp")
	require.NoError(h.t, os.WriteFile(tmp, body, 0o600))
	require.NoError(h.t, os.Rename(tmp, filepath.Join(h.dir, name)))
}

// request publishes req-<id>-<mac>.json as the shim would, with the
// right token.
func (h *harness) request(id int64, tool string, params map[string]any) {
	h.t.Helper()
	h.requestWithToken(id, h.token, tool, params)
}

// requestWithToken publishes a request authenticated with token when it is
// a string (the wrong key, for any other than the harness's), else one
// named without a MAC whose body carries token, as the bridge's first
// protocol did.
func (h *harness) requestWithToken(id int64, token any, tool string, params map[string]any) {
	h.t.Helper()
	if params == nil {
		params = map[string]any{}
	}
	if _, ok := params["id"]; !ok {
		params["id"] = id
	}
	key, keyed := token.(string)
	fields := map[string]any{"id": id, "tool": tool, "params": params}
	if !keyed {
		fields["token"] = token
	}
	body, err := json.Marshal(fields)
	require.NoError(h.t, err)
	name := unauthenticatedRequest(id)
	if keyed {
		name = RequestName(key, id, body)
	}
	h.publishRequest(id, name, body)
}

// publishRequest publishes body as id's request under name.
func (h *harness) publishRequest(id int64, name string, body []byte) {
	h.t.Helper()
	h.namesMu.Lock()
	h.reqNames[id] = name
	h.namesMu.Unlock()
	h.publish(name, body)
}

// requestBody publishes body as id's request, authenticated.
func (h *harness) requestBody(id int64, body []byte) {
	h.t.Helper()
	h.publishRequest(id, RequestName(h.token, id, body), body)
}

// reqName is the name id's request was last published under.
func (h *harness) reqName(id int64) string {
	h.namesMu.Lock()
	defer h.namesMu.Unlock()
	if name, ok := h.reqNames[id]; ok {
		return name
	}
	return unauthenticatedRequest(id)
}

// unauthenticatedRequest is a request name without a MAC.
func unauthenticatedRequest(id int64) string { return fmt.Sprintf("req-%d.json", id) }

// frameName is the authenticated name of a frame of kind numbered num.
func (h *harness) frameName(kind, num string, body []byte) string {
	return FrameName(kind, num, FrameMAC(h.token, kind, num, body))
}

// frame publishes body as the shim publishes a frame of kind numbered n,
// and returns its name.
func (h *harness) frame(kind string, n int, body []byte) string {
	h.t.Helper()
	name := h.frameName(kind, strconv.Itoa(n), body)
	h.publish(name, body)
	return name
}

// exceptionRecord publishes body as the shim's exception record.
func (h *harness) exceptionRecord(body []byte) string {
	h.t.Helper()
	name := h.frameName(KindException, "", body)
	h.publish(name, body)
	return name
}

// hostResponse publishes an answer to id as the pump writes it.
func (h *harness) hostResponse(id int64, ok bool, text string) {
	h.t.Helper()
	h.publish(responseName(id), encodeResponse(h.cfg.Token, id, ok, text))
}

// lone is the bridge of the harness's lone passes, with its unlink hook.
func (h *harness) lone() bridge {
	b := h.bridge
	if b.unlink == nil {
		b.unlink = h.hooks.unlink
	}
	return b
}

func (h *harness) sweep() {
	h.t.Helper()
	require.NoError(h.t, newSweeper(h.cfg, h.lone(), &h.stats).run(context.Background()))
}

// recoverDebts is recoverOnce with the harness's bridge and hooks.
func (h *harness) recoverDebts(ledger claimLedger) {
	h.t.Helper()
	require.NoError(h.t, newSweeper(h.cfg, h.lone(), &h.stats).recoverDebts(ledger))
}

// drainNotifications is the package's drainNotifications with the
// harness's bridge.
func (h *harness) drainNotifications() {
	newSweeper(h.cfg, h.lone(), &h.stats).drainNotifications()
}

func (h *harness) path(name string) string { return filepath.Join(h.dir, name) }

type response struct {
	ID      int64  `json:"id"`
	OK      bool   `json:"ok"`
	Content string `json:"content"`
	Error   string `json:"error"`
}

// response reads res-<id>.json, which must be authenticated as the
// shim checks it (with an empty token nothing can be, and only the shape
// is checked), or be the unauthenticated answer to an unauthenticated
// request; ok is false when there is none.
func (h *harness) response(id int64) (response, bool) {
	h.t.Helper()
	file, err := os.ReadFile(h.path(responseName(id)))
	if errors.Is(err, fs.ErrNotExist) {
		return response{}, false
	}
	require.NoError(h.t, err)
	var body []byte
	switch {
	case bytes.Equal(file, unauthenticatedAnswer(id)):
		body = file
	case h.cfg.Token == "":
		require.GreaterOrEqual(h.t, len(file), responseHeadLen, "response %d: %s", id, file)
		body = append([]byte{'{'}, file[responseHeadLen:]...)
	default:
		var ok bool
		body, ok = responseBody(h.cfg.Token, id, file)
		require.True(h.t, ok, "response %d is not authenticated: %s", id, file)
	}
	var r response
	require.NoError(h.t, json.Unmarshal(body, &r), "response %d: %s", id, body)
	return r, true
}

func (h *harness) mustResponse(id int64) response {
	h.t.Helper()
	r, ok := h.response(id)
	require.True(h.t, ok, "no response for id %d", id)
	return r
}

func (h *harness) exists(name string) bool {
	_, err := os.Lstat(h.path(name))
	return err == nil
}

// names lists the rpc directory.
func (h *harness) names() []string {
	h.t.Helper()
	des, err := os.ReadDir(h.dir)
	require.NoError(h.t, err)
	var out []string
	for _, de := range des {
		out = append(out, de.Name())
	}
	return out
}

// waitFor polls cond with a generous hang guard.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// textTool answers a fixed text.
func textTool(s string) *funcTool {
	return &funcTool{name: "text", fn: func(context.Context, map[string]any) (tools.Result, error) {
		return tools.TextResult(s), nil
	}}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// collectNotes has the server hand its notifications to a list any
// goroutine may read: the returned function copies it.
func (h *harness) collectNotes() func() []string {
	var mu sync.Mutex
	var got []string
	h.cfg.OnNotify = func(msg string) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, msg)
	}
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
}

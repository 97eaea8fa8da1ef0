package executecode_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/config"
	"github.com/executecode/executecode/telemetry"
)

// waitFor bounds a broken test; it measures nothing.
const waitFor = 20 * time.Second

// lockedBuffer is a log sink shared by the runtime and the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// rig is one test's runtime, its recorded events and its logs.
type rig struct {
	t    *testing.T
	rt   *executecode.Runtime
	rec  *telemetry.Recorder
	bus  *telemetry.Bus
	root string
	tmp  string
	// events is the telemetry log handler's output; logs the runtime's
	// own logger at debug level.
	events *lockedBuffer
	logs   *lockedBuffer
}

type rigOption struct {
	cfg  func(*config.Config)
	opts []executecode.Option
	root string
	tmp  string
	pre  func(*executecode.Runtime)
}

func withCfg(f func(*config.Config)) rigOption { return rigOption{cfg: f} }

func withOption(o executecode.Option) rigOption { return rigOption{opts: []executecode.Option{o}} }

func withRoot(dir string) rigOption { return rigOption{root: dir} }

// withTmpDir makes the staging roots in dir, which another rig may share.
func withTmpDir(dir string) rigOption { return rigOption{tmp: dir} }

func beforeUse(f func(*executecode.Runtime)) rigOption { return rigOption{pre: f} }

// newRig builds an enabled runtime in session mode (tune to change it)
// over a fresh root and staging TMPDIR, whose events go to a recorder and
// a log handler.
func newRig(t *testing.T, tune ...rigOption) *rig {
	t.Helper()
	r := &rig{t: t, rec: &telemetry.Recorder{}, bus: &telemetry.Bus{}, root: t.TempDir(), tmp: t.TempDir(),
		events: &lockedBuffer{}, logs: &lockedBuffer{}}
	r.bus.Subscribe(r.rec)
	r.bus.Subscribe(telemetry.LogHandler{Logger: zerolog.New(r.events)})
	cfg := config.Defaults()
	cfg.Enabled = true
	cfg.KernelMode = config.Session
	opts := []executecode.Option{executecode.WithTelemetry(r.bus),
		executecode.WithLogger(zerolog.New(r.logs).Level(zerolog.DebugLevel))}
	var pre []func(*executecode.Runtime)
	for _, o := range tune {
		if o.cfg != nil {
			o.cfg(&cfg)
		}
		if o.root != "" {
			r.root = o.root
		}
		if o.tmp != "" {
			r.tmp = o.tmp
		}
		if o.pre != nil {
			pre = append(pre, o.pre)
		}
		opts = append(opts, o.opts...)
	}
	opts = append(opts, executecode.WithRoot(r.root), executecode.WithTmpDir(r.tmp))
	rt, err := executecode.New(cfg, opts...)
	require.NoError(t, err)
	for _, f := range pre {
		f(rt)
	}
	r.rt = rt
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		require.NoError(t, rt.Close(ctx))
		require.NoError(t, r.bus.Close(ctx))
	})
	return r
}

func (r *rig) attach(session string) *executecode.Owner {
	r.t.Helper()
	o, err := r.rt.Attach(context.Background(), executecode.Scope{SessionID: session, AgentID: "main"})
	require.NoError(r.t, err)
	r.t.Cleanup(func() { _ = o.Detach(context.Background()) })
	return o
}

// coAttach makes a co-owner of session's kernels.
func (r *rig) coAttach(session string) *executecode.Owner {
	r.t.Helper()
	o, err := r.rt.AttachCoOwner(context.Background(), executecode.Scope{SessionID: session, AgentID: "main"})
	require.NoError(r.t, err)
	r.t.Cleanup(func() { _ = o.Detach(context.Background()) })
	return o
}

// run executes script as a call of o (nil: no session scope).
func (r *rig) run(o *executecode.Owner, script string, timeoutMS ...int) executecode.Result {
	r.t.Helper()
	res, err := r.exec(o, script, timeoutMS...)
	require.NoError(r.t, err)
	return res
}

// goRun is run for a goroutine other than the test's: a tool error is
// reported, not fatal.
func (r *rig) goRun(o *executecode.Owner, script string) executecode.Result {
	res, err := r.exec(o, script)
	assert.NoError(r.t, err)
	return res
}

func (r *rig) exec(o *executecode.Owner, script string, timeoutMS ...int) (executecode.Result, error) {
	call := executecode.Call{Script: script, Owner: o}
	if len(timeoutMS) > 0 {
		call.TimeoutMS = timeoutMS[0]
	}
	return r.rt.Execute(context.Background(), call)
}

// trace renders the recorded events compactly: the family, the reason
// and, for kernel starts, stops and crashes, the live count.
func (r *rig) trace() []string {
	var out []string
	for _, e := range r.rec.Events() {
		out = append(out, describe(e))
	}
	return out
}

func describe(e telemetry.Event) string {
	switch e := e.(type) {
	case telemetry.ExecuteCodeStop:
		return "execute_code.stop"
	case telemetry.SessionStart:
		return fmt.Sprintf("session.start live=%d", e.LiveKernels)
	case telemetry.SessionStop:
		return fmt.Sprintf("session.stop(%s) live=%d", e.Reason, e.LiveKernels)
	case telemetry.SessionCrash:
		return fmt.Sprintf("session.crash(%s) live=%d", e.Reason, e.LiveKernels)
	case telemetry.SessionReap:
		return fmt.Sprintf("session.reap(%s) live=%d", e.Reason, e.LiveKernels)
	case telemetry.SessionEvict:
		return fmt.Sprintf("session.evict live=%d", e.LiveKernels)
	case telemetry.CellStart:
		return "cell.start"
	case telemetry.CellStop:
		return fmt.Sprintf("cell.stop(%s)", e.Outcome)
	case telemetry.CellCancel:
		return fmt.Sprintf("cell.cancel(%s)", e.Cause)
	case telemetry.Fallback:
		return fmt.Sprintf("fallback(%s)", e.Reason)
	case telemetry.BridgeDeny:
		return "bridge.deny"
	case telemetry.ApprovalRequested:
		return fmt.Sprintf("approvals.requested(%s)", e.Tool)
	case telemetry.ApprovalResolved:
		return fmt.Sprintf("approvals.resolved(%s,%s)", e.Tool, e.Decision)
	}
	return e.Name()
}

// expectTrace waits until the trace equals want: events of actors (a
// kernel's stop, say) may land after the call returned.
func (r *rig) expectTrace(want ...string) { r.t.Helper(); r.expectSince(0, true, want...) }

// mark is the number of events recorded so far.
func (r *rig) mark() int { return len(r.rec.Events()) }

// expectSince waits until the events recorded after mark are want: in
// that order, or (ordered false) in any order, for events of independent
// actors.
func (r *rig) expectSince(mark int, ordered bool, want ...string) {
	r.t.Helper()
	norm := func(xs []string) []string {
		xs = slices.Clone(xs)
		if !ordered {
			slices.Sort(xs)
		}
		return xs
	}
	deadline := time.Now().Add(waitFor)
	for {
		got := r.trace()[mark:]
		if slices.Equal(norm(got), norm(want)) {
			return
		}
		if time.Now().After(deadline) || len(got) >= len(want) {
			require.Equal(r.t, norm(want), norm(got))
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// snapshot takes the runtime's snapshot.
func (r *rig) snapshot() executecode.Snapshot {
	r.t.Helper()
	s, err := r.rt.Snapshot(context.Background())
	require.NoError(r.t, err)
	return s
}

// waitSnapshot polls the snapshot until ok holds.
func (r *rig) waitSnapshot(ok func(executecode.Snapshot) bool, what string) executecode.Snapshot {
	r.t.Helper()
	var s executecode.Snapshot
	require.Eventually(r.t, func() bool { s = r.snapshot(); return ok(s) }, waitFor, 5*time.Millisecond, what)
	return s
}

func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	return p
}

func removeFile(p string) error { return os.Remove(p) }

package executecode_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/approval"
	"github.com/executecode/executecode/config"
	"github.com/executecode/executecode/internal/proc"
)

// marker is planted everywhere a script can put text: code, output,
// exceptions, file names, tool arguments, notify, text(), forged bridge
// requests, and the session ids, tool root and interpreter path.
const marker = "ZQXMARKER7731"

// hostile uses every channel a script has to say the marker.
const hostile = `
import json, os, sys, time, exec_tools
M = "ZQX" + "MARKER7731"
print(M)
print(M, file=sys.stderr)
notify(M)
open(M + "-file.txt", "w").write(M)
try:
    read(M + "/no/such/" + M)
except ToolError as e:
    print("tool error", e)
try:
    grep(M, path=M)
except ToolError as e:
    print(e)
B = exec_tools._BRIDGE
p = os.path.join(B.dir, "req-777.json")
with open(p + ".x", "w") as f:
    f.write(json.dumps({"id": 777, "token": M, "tool": M, "params": {"path": M}}))
os.replace(p + ".x", p)
while not os.path.exists(os.path.join(B.dir, "res-777.json")):
    time.sleep(0.005)
text(M)
`

func TestNoEventLogLineSnapshotOrMetricCarriesWhatAScriptSays(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, marker+"-root")
	require.NoError(t, os.Mkdir(root, 0o755))
	writeFile(t, root, marker+".txt", marker)
	python, err := proc.ResolvePython("")
	require.NoError(t, err)
	binDir := filepath.Join(base, marker+"-bin")
	require.NoError(t, os.Mkdir(binDir, 0o755))
	linked := filepath.Join(binDir, "python3")
	require.NoError(t, os.Symlink(python, linked))

	approver := approval.ApproverFunc(func(_ context.Context, req approval.Request) (approval.Decision, error) {
		if strings.Contains(fmt.Sprint(req.Args), "first") {
			return approval.ApproveOnce, nil
		}
		return approval.Deny, nil
	})
	r := newRig(t, withRoot(root), withOption(executecode.WithApprover(approver)), withCfg(func(c *config.Config) {
		c.PythonPath = linked
		c.MaxLiveKernels = 2
		c.RequireApproval = []string{"ls"}
	}))
	approvals := `
try:
    ls(M + "-first")
except ToolError as e:
    print(e)
try:
    ls(M + "-second")
except ToolError as e:
    print(e)
`
	// Session cells: success, exception, timeout, crash, approvals.
	o, err := r.rt.Attach(context.Background(), executecode.Scope{SessionID: marker, AgentID: marker})
	require.NoError(t, err)
	r.run(o, hostile+approvals)
	r.run(o, hostile+"raise ValueError(M)")
	_, err = r.rt.Execute(context.Background(), executecode.Call{Script: hostile, Owner: o, Reset: true})
	require.NoError(t, err)
	r.run(o, hostile+"print(M, flush=True)\ntime.sleep(60)", 1000)
	r.run(o, hostile+"os._exit(7)")
	r.run(o, hostile)
	// A second and a third owner: a third kernel over a cap of two.
	o2, err := r.rt.Attach(context.Background(), executecode.Scope{SessionID: marker + "2", AgentID: marker})
	require.NoError(t, err)
	o3, err := r.rt.Attach(context.Background(), executecode.Scope{SessionID: marker + "3", AgentID: marker})
	require.NoError(t, err)
	r.run(o2, hostile)
	r.run(o3, hostile)
	// Fallback (no session scope), then the per-call path itself.
	r.run(nil, hostile+approvals+"raise RuntimeError(M)")
	for _, ow := range []*executecode.Owner{o, o2, o3} {
		require.NoError(t, ow.Detach(context.Background()))
	}
	perCall := newRig(t, withRoot(root), withOption(executecode.WithApprover(approver)), withCfg(func(c *config.Config) {
		c.KernelMode = config.PerCall
		c.PythonPath = linked
		c.RequireApproval = []string{"ls"}
	}))
	perCall.run(nil, hostile+approvals+"raise RuntimeError(M)")
	perCall.run(nil, hostile+"time.sleep(60)", 1000)

	for _, rg := range []*rig{r, perCall} {
		rg.waitSnapshot(func(s executecode.Snapshot) bool { return s.Capacity.Live == 0 }, "every kernel gone")
		require.NoError(t, rg.bus.Flush(context.Background()))
		names := map[string]bool{}
		for _, e := range rg.rec.Events() {
			names[e.Name()] = true
		}
		forbidden := []string{marker, root, base, linked, python, rg.tmp}
		check := func(what, text string) {
			t.Helper()
			require.NotEmpty(t, text, what)
			for _, f := range forbidden {
				assert.NotContains(t, text, f, "%s carries %q", what, f)
			}
		}
		check("events", fmt.Sprintf("%+v", rg.rec.Events()))
		check("event log lines", rg.events.String())
		// The runtime's own log names its staging root (the operator's
		// TMPDIR) at debug level, but never a workspace or bridge in it.
		check("runtime log", strings.ReplaceAll(strings.ReplaceAll(rg.logs.String(), rg.tmp, "<tmp>"), "<tmp>/execute-code-private-", "<staging>")+" ")
		assert.NotContains(t, rg.logs.String(), "python-kernel", "a kernel workspace in the log")
		assert.NotContains(t, rg.logs.String(), "exec-code", "a bridge in the log")
		snap, err := json.Marshal(rg.snapshot())
		require.NoError(t, err)
		check("snapshot", string(snap))
		entries, err := json.Marshal(rg.rt.Lifecycle())
		require.NoError(t, err)
		check("lifecycle", string(entries))
		check("metrics", scrape(t, rg.rt))
		t.Logf("events seen: %v", names)
	}
	// The scenario really went through every path.
	trace := strings.Join(r.trace(), " ")
	for _, want := range []string{"cell.stop(exception)", "cell.stop(timeout)", "session.crash(port_exit)",
		"session.stop(reset)", "session.evict", "fallback(missing_session_scope)", "bridge.deny",
		"approvals.resolved(ls,approve_once)", "approvals.resolved(ls,deny)", "execute_code.stop"} {
		assert.Contains(t, trace, want)
	}
}

// scrape renders the runtime's metrics in the text exposition format.
func scrape(t *testing.T, rt *executecode.Runtime) string {
	t.Helper()
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(rt.Metrics()))
	families, err := reg.Gather()
	require.NoError(t, err)
	var b strings.Builder
	for _, f := range families {
		_, err := expfmt.MetricFamilyToText(&b, f)
		require.NoError(t, err)
	}
	return b.String()
}

package executecode_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/config"
	"github.com/executecode/executecode/internal/proctest"
)

// A session cell's bridge is made while its kernel is idle, in the
// kernel's cell stock beside its home, and moves into the home when the
// cell begins (kernelhome.go). These tests attack what is made ahead.

// premade waits for the bridge made ahead for a kernel's next cell and
// returns its base directory, in the stock.
func premade(t *testing.T, tmp string) string {
	t.Helper()
	var base string
	require.Eventually(t, func() bool {
		m, _ := filepath.Glob(filepath.Join(tmp, "execute-code-private-*", "cell-stock-*", "exec-code-cell-*", "rpc-*"))
		if len(m) != 1 {
			return false
		}
		base = filepath.Dir(m[0])
		return true
	}, waitFor, 5*time.Millisecond, "the next cell's bridge, made ahead")
	return base
}

// bridgeOfCell is the script of a cell that names its own bridge
// directory (its base's name) and proves its helpers work.
const bridgeOfCell = `
import exec_tools, os
text(os.path.basename(os.path.dirname(exec_tools._BRIDGE.dir)))
text(read("tool.txt", limit=1))
`

// A thread a cell leaves running goes on while its kernel is idle, when
// the next cell's bridge waits in the stock. Under the sandbox it can
// neither list the stock nor see, enter, write or move that bridge; the
// next cell then runs on exactly that bridge, untouched.
func TestAConfinedKernelCannotReachItsNextCellsBridge(t *testing.T) {
	r := sandboxRig(t, config.Session, proctest.Python(t))
	o := r.attach("s")
	res := r.run(o, `
import json, os, threading, time
def probe():
    end = time.time() + 60
    while not os.path.exists("probe.json") and time.time() < end:
        time.sleep(0.005)
    P = json.load(open("probe.json"))
    R = {}
    def check(name, f):
        try:
            f()
            R[name] = "ok"
        except OSError as e:
            R[name] = "denied " + __import__("errno").errorcode.get(e.errno, str(e.errno))
    check("list_stock", lambda: os.listdir(P["stock"]))
    check("list_base", lambda: os.listdir(P["base"]))
    check("list_rpc", lambda: os.listdir(P["rpc"]))
    check("plant", lambda: open(os.path.join(P["rpc"], "res-1.json"), "w").write("{}"))
    check("move", lambda: os.rename(P["base"], os.path.join(os.environ["HOME"], "stolen")))
    with open(os.path.join(os.environ["HOME"], "probe-tmp"), "w") as f:
        json.dump(R, f)
    os.rename(os.path.join(os.environ["HOME"], "probe-tmp"), os.path.join(os.environ["HOME"], "probe-result.json"))
threading.Thread(target=probe, daemon=True).start()
text("started")
`)
	require.Equal(t, []string{"started"}, res.Blocks, res.Text())
	base := premade(t, r.tmp)
	rpcs, _ := filepath.Glob(filepath.Join(base, "rpc-*"))
	require.Len(t, rpcs, 1)
	probe, err := json.Marshal(map[string]string{"stock": filepath.Dir(base), "base": base, "rpc": rpcs[0]})
	require.NoError(t, err)
	writeFile(t, r.root, "probe.json", string(probe))

	var result string
	require.Eventually(t, func() bool {
		m, _ := filepath.Glob(filepath.Join(r.tmp, "execute-code-private-*", "python-kernel-*", "kernel-*", "probe-result.json"))
		if len(m) != 1 {
			return false
		}
		b, err := os.ReadFile(m[0])
		result = string(b)
		return err == nil
	}, waitFor, 5*time.Millisecond, "the thread's probe")
	var checks map[string]string
	require.NoError(t, json.Unmarshal([]byte(result), &checks))
	for _, name := range []string{"list_stock", "list_base", "list_rpc", "plant", "move"} {
		assert.Equal(t, "denied EACCES", checks[name], name)
	}

	res = r.run(o, bridgeOfCell)
	require.Len(t, res.Blocks, 2, res.Text())
	assert.Equal(t, filepath.Base(base), res.Blocks[0], "the next cell runs on the bridge made for it")
	assert.Equal(t, "tool root content", strings.TrimSpace(stripLineNumber(res.Blocks[1])))
}

// Outside the sandbox a script of the same user can reach the stock. A
// name planted in the home where the next bridge is to arrive, or the
// bridge swapped for a link, is never used: the cell runs on a bridge
// made then, and nothing reaches what the link points to. Files planted
// into the waiting bridge are refused like any forgery.
func TestATamperedPremadeBridgeIsNeverTrusted(t *testing.T) {
	tamper := map[string]func(t *testing.T, base, outside string){
		"name planted in the home": func(t *testing.T, base, _ string) {
			home := homeOf(t, base)
			require.NoError(t, os.Mkdir(filepath.Join(home, filepath.Base(base)), 0o700))
		},
		"rpc directory swapped for a link": func(t *testing.T, base, outside string) {
			rpcs, _ := filepath.Glob(filepath.Join(base, "rpc-*"))
			require.Len(t, rpcs, 1)
			require.NoError(t, os.Remove(rpcs[0]))
			require.NoError(t, os.Symlink(outside, rpcs[0]))
		},
		"base swapped for a link": func(t *testing.T, base, outside string) {
			rpcs, _ := filepath.Glob(filepath.Join(base, "rpc-*"))
			require.Len(t, rpcs, 1)
			require.NoError(t, os.Rename(base, base+".moved"))
			require.NoError(t, os.Symlink(outside, base))
			require.NoError(t, os.Mkdir(filepath.Join(outside, filepath.Base(rpcs[0])), 0o700))
		},
		"base made world-readable": func(t *testing.T, base, _ string) {
			require.NoError(t, os.Chmod(base, 0o755))
		},
	}
	for name, f := range tamper {
		t.Run(name, func(t *testing.T) {
			r := newRig(t)
			writeFile(t, r.root, "tool.txt", "tool root content\n")
			o := r.attach("s")
			require.Equal(t, []string{"warm"}, r.run(o, "text('warm')").Blocks)
			base := premade(t, r.tmp)
			outside := t.TempDir()
			f(t, base, outside)

			res := r.run(o, bridgeOfCell)
			require.Len(t, res.Blocks, 2, res.Text())
			assert.NotEqual(t, filepath.Base(base), res.Blocks[0], "a bridge made when the cell began")
			assert.Equal(t, "tool root content", strings.TrimSpace(stripLineNumber(res.Blocks[1])))
			left, err := os.ReadDir(outside)
			require.NoError(t, err)
			for _, e := range left {
				sub, _ := os.ReadDir(filepath.Join(outside, e.Name()))
				assert.Empty(t, sub, "nothing written where the link points")
			}
		})
	}
}

func TestFilesPlantedIntoThePremadeBridgeAreRefused(t *testing.T) {
	r := newRig(t)
	writeFile(t, r.root, "tool.txt", "tool root content\n")
	o := r.attach("s")
	require.Equal(t, []string{"warm"}, r.run(o, "text('warm')").Blocks)
	base := premade(t, r.tmp)
	rpcs, _ := filepath.Glob(filepath.Join(base, "rpc-*"))
	require.Len(t, rpcs, 1)
	for name, body := range map[string]string{
		"res-1.json":    `{"id":1,"ok":true,"content":"FORGED"}`,
		"text-1.json":   `{"n": 1, "text": "FORGED"}`,
		"notify-1.json": `{"n": 1, "msg": "FORGED"}`,
	} {
		writeFile(t, rpcs[0], name, body)
	}
	res := r.run(o, bridgeOfCell)
	require.Len(t, res.Blocks, 2, res.Text())
	assert.Equal(t, filepath.Base(base), res.Blocks[0])
	assert.NotContains(t, res.Text(), "FORGED")
	assert.Equal(t, "tool root content", strings.TrimSpace(stripLineNumber(res.Blocks[1])))
	assert.Equal(t, 1, res.Details.RPCCalls)
}

// What was made ahead belongs to its kernel: the kernel's end, a detach
// or a kill -9, removes it, and nothing is left in the staging root.
func TestAPremadeBridgeGoesWithItsKernel(t *testing.T) {
	for _, end := range []string{"detach", "kill -9"} {
		t.Run(end, func(t *testing.T) {
			r := newRig(t)
			o := r.attach("s")
			res := r.run(o, "import os\ntext(str(os.getpid()))")
			require.Len(t, res.Blocks, 1, res.Text())
			premade(t, r.tmp)
			switch end {
			case "detach":
				require.NoError(t, o.Detach(context.Background()))
			default:
				pid, err := strconv.Atoi(res.Blocks[0])
				require.NoError(t, err)
				require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
			}
			require.Eventually(t, func() bool {
				m, _ := filepath.Glob(filepath.Join(r.tmp, "execute-code-private-*", "*"))
				// The root's owner marker is all that may be left.
				return len(m) == 1 && filepath.Base(m[0]) == rootMarker
			}, waitFor, 10*time.Millisecond, "the kernel's home and stock removed")
			ctx, cancel := context.WithTimeout(context.Background(), waitFor)
			defer cancel()
			require.NoError(t, r.rt.Close(ctx))
			left, err := os.ReadDir(r.tmp)
			require.NoError(t, err)
			assert.Empty(t, left, "nothing left in the staging directory after Close")
		})
	}
}

// rootMarker is the staging root's owner marker (internal/privfs).
const rootMarker = ".execute-code-owner"

// homeOf is the kernel home beside the stock holding base.
func homeOf(t *testing.T, base string) string {
	t.Helper()
	homes, _ := filepath.Glob(filepath.Join(filepath.Dir(filepath.Dir(base)), "python-kernel-*"))
	require.Len(t, homes, 1)
	return homes[0]
}

// stripLineNumber drops read()'s line-number gutter.
func stripLineNumber(s string) string {
	if i := strings.IndexByte(s, '\t'); i >= 0 {
		return s[i+1:]
	}
	return s
}

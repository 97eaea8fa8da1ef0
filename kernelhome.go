package executecode

import (
	"context"
	"errors"
	"path/filepath"
	"sync"

	"github.com/executecode/executecode/internal/proc"
	"github.com/executecode/executecode/privatetmp"
	"github.com/executecode/executecode/pump"
)

// A kernel's home is the one directory its interpreter may write under
// the sandbox: it holds the kernel's workspace (runner, helper module,
// HOME, TMPDIR) and every bridge of the kernel's cells, which are made
// after the kernel confined itself and must still be beneath its rule.
// The workspace goes when the kernel ends, but a cell's bridge may
// outlive it (a timed-out cell's text() blocks are read once the kernel
// is gone), so whichever of the two ends last removes the home, with
// anything the script left in it.
type kernelHome struct {
	dir   string
	cells int
	gone  bool
}

// errKernelGone: a cell bridge asked of a kernel that already ended.
var errKernelGone = errors.New("kernel workspace is gone")

// homes maps each kernel workspace to its home.
type homes struct {
	mu sync.Mutex
	m  map[string]*kernelHome
}

// kernelWorkspace reserves a kernel's home and its workspace in it
// (kernelworker.Options.Workspace).
func (r *Runtime) kernelWorkspace() (string, error) {
	rs, err := r.staging()
	if err != nil {
		return "", err
	}
	home, err := privatetmp.ReserveDir(rs.work.Path(), "python-kernel")
	if err != nil {
		return "", err
	}
	ws, err := privatetmp.ReserveDir(home, "kernel")
	if err != nil {
		privatetmp.Teardown(home, privatetmp.LabelWorkspace, &r.log)
		return "", err
	}
	r.homes.mu.Lock()
	defer r.homes.mu.Unlock()
	if r.homes.m == nil {
		r.homes.m = map[string]*kernelHome{}
	}
	r.homes.m[ws] = &kernelHome{dir: home}
	return ws, nil
}

// releaseKernelWorkspace ends a kernel's workspace once its interpreter is
// gone (kernelworker.Options.ReleaseWorkspace): the whole home, unless a
// cell bridge in it is still in use, which then removes it.
func (r *Runtime) releaseKernelWorkspace(ws string) {
	r.homes.mu.Lock()
	h := r.homes.m[ws]
	if h == nil {
		r.homes.mu.Unlock()
		privatetmp.Teardown(ws, privatetmp.LabelWorkspace, &r.log)
		return
	}
	h.gone = true
	last := h.cells == 0
	if last {
		delete(r.homes.m, ws)
	}
	r.homes.mu.Unlock()
	if last {
		privatetmp.Teardown(h.dir, privatetmp.LabelWorkspace, &r.log)
		return
	}
	privatetmp.Teardown(ws, privatetmp.LabelWorkspace, &r.log)
}

// stageCellBridge reserves a cell's private bridge in the home of the
// kernel whose workspace is kernelWS: a base directory, its rpc directory
// and a fresh token. The returned release removes it (and the home, if
// the kernel ended meanwhile).
func (r *Runtime) stageCellBridge(kernelWS string) (ws workspace, release func(), err error) {
	r.homes.mu.Lock()
	h := r.homes.m[kernelWS]
	if h == nil || h.gone {
		r.homes.mu.Unlock()
		return ws, nil, errKernelGone
	}
	h.cells++
	r.homes.mu.Unlock()
	release = func() {
		if ws.base != "" {
			privatetmp.Teardown(ws.base, privatetmp.LabelCellBridge, &r.log)
		}
		r.homes.mu.Lock()
		h.cells--
		last := h.gone && h.cells == 0
		if last {
			delete(r.homes.m, kernelWS)
		}
		r.homes.mu.Unlock()
		if last {
			privatetmp.Teardown(h.dir, privatetmp.LabelWorkspace, &r.log)
		}
	}
	if ws.base, err = privatetmp.ReserveDir(h.dir, "exec-code-cell"); err == nil {
		if ws.rpc, err = privatetmp.ReserveDir(ws.base, "rpc"); err == nil {
			ws.token, err = pump.NewToken()
		}
	}
	if err != nil {
		release()
		return workspace{}, nil, err
	}
	return ws, release, nil
}

// confineKernel is kernelworker.Options.Confine: a kernel may write its
// home, with its workspace as HOME.
func (r *Runtime) confineKernel(ctx context.Context, interpreter, ws string) (*proc.Sandbox, error) {
	return r.confine(ctx, interpreter, filepath.Dir(ws), ws)
}

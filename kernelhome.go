package executecode

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

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
//
// A cell's bridge is made before the cell arrives, while its kernel is
// idle, so that making it (two directories and a token) is not on the
// cell's path: the next cell's bridge waits in the kernel's cell stock,
// a directory of the staging root beside its home, where no cell can
// reach it (under the sandbox a kernel can read nothing of the staging
// root but its home), and moves into the home only when its cell begins. It belongs to
// one kernel and one cell: the kernel's end removes it, and a bridge is
// never used twice. Likewise a cell's bridge leaves the home as the cell
// ends, into the stock, and is removed from there off the cell's path
// (docs/architecture.md, The life of a session cell).
type kernelHome struct {
	dir   string
	cells int
	gone  bool
	// stock is the kernel's cell stock, beside its home in the staging
	// root; next is the bridge made for the kernel's next cell, in the
	// stock; making says a goroutine is making one, retiring counts the
	// ended cells' bridges being removed from it.
	stock     string
	next      *workspace
	making    bool
	retiring  int
	stockGone bool
}

// stockDone reports, once, that nothing uses h's stock any more: the
// kernel is gone and so is every bridge work of its. r.homes.mu is held.
func (h *kernelHome) stockDone() bool {
	if h.stockGone || !h.gone || h.cells > 0 || h.retiring > 0 || h.making {
		return false
	}
	h.stockGone = true
	return true
}

// errKernelGone: a cell bridge asked of a kernel that already ended.
var errKernelGone = errors.New("kernel workspace is gone")

// homes maps each kernel workspace to its home, and runs the bridge work
// done off the cells' paths.
type homes struct {
	mu sync.Mutex
	m  map[string]*kernelHome
	// tasks are the goroutines making and removing bridges; closing (set
	// by Close) starts no more of them.
	tasks   sync.WaitGroup
	closing bool
}

// kernelWorkspace reserves a kernel's home and its workspace in it
// (kernelworker.Options.Workspace), and starts making its first cell's
// bridge.
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
	stock, err := privatetmp.ReserveDir(rs.work.Path(), "cell-stock")
	if err != nil {
		privatetmp.Teardown(home, privatetmp.LabelWorkspace, &r.log)
		return "", err
	}
	h := &kernelHome{dir: home, stock: stock}
	r.homes.mu.Lock()
	defer r.homes.mu.Unlock()
	if r.homes.m == nil {
		r.homes.m = map[string]*kernelHome{}
	}
	r.homes.m[ws] = h
	r.makeNextLocked(h)
	return ws, nil
}

// releaseKernelWorkspace ends a kernel's workspace once its interpreter is
// gone (kernelworker.Options.ReleaseWorkspace): the bridge made for its
// next cell, and the whole home, unless a cell bridge in it is still in
// use, which then removes it.
func (r *Runtime) releaseKernelWorkspace(ws string) {
	r.homes.mu.Lock()
	h := r.homes.m[ws]
	if h == nil {
		r.homes.mu.Unlock()
		privatetmp.Teardown(ws, privatetmp.LabelWorkspace, &r.log)
		return
	}
	h.gone = true
	next := h.next
	h.next = nil
	last := h.cells == 0
	if last {
		delete(r.homes.m, ws)
	}
	stockDone := h.stockDone()
	r.homes.mu.Unlock()
	if next != nil {
		privatetmp.Teardown(next.base, privatetmp.LabelCellBridge, &r.log)
	}
	if stockDone {
		privatetmp.Teardown(h.stock, privatetmp.LabelWorkspace, &r.log)
	}
	if last {
		privatetmp.Teardown(h.dir, privatetmp.LabelWorkspace, &r.log)
		return
	}
	privatetmp.Teardown(ws, privatetmp.LabelWorkspace, &r.log)
}

// stageCellBridge gives a cell a private bridge in the home of the kernel
// whose workspace is kernelWS: a base directory, its rpc directory and a
// fresh token, the ones made ahead for it when they are ready, else made
// now. The returned release takes the bridge out of the home (and
// removes the home, if the kernel ended meanwhile).
func (r *Runtime) stageCellBridge(kernelWS string) (ws workspace, release func(), err error) {
	r.homes.mu.Lock()
	h := r.homes.m[kernelWS]
	if h == nil || h.gone {
		r.homes.mu.Unlock()
		return ws, nil, errKernelGone
	}
	h.cells++
	next := h.next
	h.next = nil
	r.homes.mu.Unlock()
	release = func() { r.retireCellBridge(kernelWS, h, ws) }
	if next != nil {
		if ws, err = r.adoptCellBridge(next, h.dir); err == nil {
			return ws, release, nil
		}
		r.log.Debug().Err(err).Msg("cell bridge made ahead could not be used; making another")
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

// adoptCellBridge moves the bridge made ahead from the stock into home,
// never over anything that is there, and checks that what arrived is
// still the two private directories that were made: outside the sandbox
// a script of the same user can reach the stock. Anything else is
// removed, and the cell gets a bridge made now.
func (r *Runtime) adoptCellBridge(next *workspace, home string) (workspace, error) {
	base := filepath.Join(home, filepath.Base(next.base))
	if err := unix.Renameat2(unix.AT_FDCWD, next.base, unix.AT_FDCWD, base, unix.RENAME_NOREPLACE); err != nil {
		privatetmp.Teardown(next.base, privatetmp.LabelCellBridge, &r.log)
		return workspace{}, err
	}
	ws := workspace{base: base, rpc: filepath.Join(base, filepath.Base(next.rpc)), token: next.token}
	for _, dir := range []string{ws.base, ws.rpc} {
		if err := privateDir(dir); err != nil {
			privatetmp.Teardown(base, privatetmp.LabelCellBridge, &r.log)
			return workspace{}, err
		}
	}
	return ws, nil
}

// euid is the host's effective user, which owns every private directory.
var euid = os.Geteuid()

// errNotPrivate: a bridge directory made ahead is no longer a private
// directory of this user.
var errNotPrivate = errors.New("cell bridge is not a private directory")

// privateDir checks dir is itself (no link) a directory of this user at
// exactly 0700, as privatetmp.ReserveDir made it.
func privateDir(dir string) error {
	var st syscall.Stat_t
	if err := syscall.Lstat(dir, &st); err != nil {
		return err
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFDIR || st.Mode&0o7777 != 0o700 || int(st.Uid) != euid {
		return errNotPrivate
	}
	return nil
}

// retireCellBridge ends a cell's bridge: it leaves the kernel's home at
// once, into the stock, where it is removed off the cell's path, and the
// kernel's next cell gets a bridge made meanwhile.
func (r *Runtime) retireCellBridge(kernelWS string, h *kernelHome, ws workspace) {
	retired := ""
	if ws.base != "" {
		// The bridge's own name, which nothing else in the stock has;
		// should the rename fail, the bridge is removed in place.
		to := filepath.Join(h.stock, "retired-"+filepath.Base(ws.base))
		if unix.Renameat2(unix.AT_FDCWD, ws.base, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE) == nil {
			retired = to
		} else {
			privatetmp.Teardown(ws.base, privatetmp.LabelCellBridge, &r.log)
		}
	}
	r.homes.mu.Lock()
	h.cells--
	last := h.gone && h.cells == 0
	if last {
		delete(r.homes.m, kernelWS)
	}
	// One goroutine makes the next bridge, which the kernel's next cell
	// may already be waiting for, and then removes the retired one, so
	// that the two never contend with each other, nor with the cell's
	// caller, which returns meanwhile.
	makeNext := r.mayMakeNextLocked(h)
	background := retired != "" && !r.homes.closing
	if background {
		h.retiring++
	}
	if background || makeNext {
		r.homes.tasks.Add(1)
	}
	stockDone := !background && !makeNext && h.stockDone()
	r.homes.mu.Unlock()
	if last {
		privatetmp.Teardown(h.dir, privatetmp.LabelWorkspace, &r.log)
	}
	if retired != "" && !background {
		privatetmp.Teardown(retired, privatetmp.LabelCellBridge, &r.log)
	}
	if stockDone {
		privatetmp.Teardown(h.stock, privatetmp.LabelWorkspace, &r.log)
	}
	if !background && !makeNext {
		return
	}
	go func() {
		defer r.homes.tasks.Done()
		if makeNext {
			r.makeNext(h)
		}
		if !background {
			return
		}
		privatetmp.Teardown(retired, privatetmp.LabelCellBridge, &r.log)
		r.homes.mu.Lock()
		h.retiring--
		stockDone := h.stockDone()
		r.homes.mu.Unlock()
		if stockDone {
			privatetmp.Teardown(h.stock, privatetmp.LabelWorkspace, &r.log)
		}
	}()
}

// makeNextLocked starts making h's next bridge on a goroutine of its
// own, when it may (mayMakeNextLocked). r.homes.mu is held.
func (r *Runtime) makeNextLocked(h *kernelHome) {
	if !r.mayMakeNextLocked(h) {
		return
	}
	r.homes.tasks.Add(1)
	go func() {
		defer r.homes.tasks.Done()
		r.makeNext(h)
	}()
}

// mayMakeNextLocked says whether h's next bridge is to be made now: it has
// none, none is being made, the kernel lives and the runtime is not
// closing. If so, h is marked as making one, and the caller must call
// makeNext. r.homes.mu is held.
func (r *Runtime) mayMakeNextLocked(h *kernelHome) bool {
	if h.next != nil || h.making || h.gone || r.homes.closing {
		return false
	}
	h.making = true
	return true
}

// makeNext makes h's next bridge in its stock, and keeps it unless the
// kernel ended or the runtime began to close meanwhile.
func (r *Runtime) makeNext(h *kernelHome) {
	next, err := r.makeCellBridge(h.stock)
	r.homes.mu.Lock()
	h.making = false
	keep := err == nil && !h.gone && !r.homes.closing
	if keep {
		h.next = &next
	}
	stockDone := h.stockDone()
	r.homes.mu.Unlock()
	if err != nil {
		r.log.Debug().Err(err).Msg("cell bridge not made ahead")
	}
	if err == nil && !keep {
		privatetmp.Teardown(next.base, privatetmp.LabelCellBridge, &r.log)
	}
	if stockDone {
		privatetmp.Teardown(h.stock, privatetmp.LabelWorkspace, &r.log)
	}
}

// makeCellBridge makes a bridge in stock: a base directory, its rpc
// directory, and a fresh token.
func (r *Runtime) makeCellBridge(stock string) (workspace, error) {
	var ws workspace
	var err error
	if ws.base, err = privatetmp.ReserveDir(stock, "exec-code-cell"); err != nil {
		return workspace{}, err
	}
	if ws.rpc, err = privatetmp.ReserveDir(ws.base, "rpc"); err == nil {
		ws.token, err = pump.NewToken()
	}
	if err != nil {
		privatetmp.Teardown(ws.base, privatetmp.LabelCellBridge, &r.log)
		return workspace{}, err
	}
	return ws, nil
}

// offPath runs fn on a goroutine of the bridge work, which Close waits
// for, and says whether it did: once Close has begun, it is the caller's
// to run.
func (r *Runtime) offPath(fn func()) bool {
	r.homes.mu.Lock()
	closing := r.homes.closing
	if !closing {
		r.homes.tasks.Add(1)
	}
	r.homes.mu.Unlock()
	if closing {
		return false
	}
	go func() {
		defer r.homes.tasks.Done()
		fn()
	}()
	return true
}

// closeHomes is Close's part, once every kernel is stopped: no bridge
// work starts any more, what runs is waited for, and any stock still
// there goes with what is in it.
func (r *Runtime) closeHomes(ctx context.Context) error {
	r.homes.mu.Lock()
	r.homes.closing = true
	r.homes.mu.Unlock()
	done := make(chan struct{})
	go func() { r.homes.tasks.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return errors.New("close: cell bridges still being made or removed")
	}
	r.homes.mu.Lock()
	var stocks []string
	for _, h := range r.homes.m {
		if !h.stockGone {
			h.stockGone, h.next = true, nil
			stocks = append(stocks, h.stock)
		}
	}
	r.homes.mu.Unlock()
	for _, stock := range stocks {
		privatetmp.Teardown(stock, privatetmp.LabelWorkspace, &r.log)
	}
	return nil
}

// confineKernel is kernelworker.Options.Confine: a kernel may write its
// home, with its workspace as HOME.
func (r *Runtime) confineKernel(ctx context.Context, interpreter, ws string) (*proc.Sandbox, error) {
	return r.confine(ctx, interpreter, filepath.Dir(ws), ws)
}

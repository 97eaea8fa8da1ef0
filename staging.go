package executecode

import (
	"errors"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/executecode/executecode/privatetmp"
)

// sharedMemoryDir is where workspaces go when TMPDIR is unset: bridge
// round trips are a handful of file creations and renames each, which a
// tmpfs does in microseconds and a journalling disk filesystem may take a
// millisecond for.
const sharedMemoryDir = "/dev/shm"

// roots are a runtime's private staging roots: work holds per-call
// workspaces and bridges, spill holds full-output spill files. They are the
// same root unless workspaces moved to a tmpfs, in which case spills stay
// on TMPDIR, where a large output costs disk rather than memory; that root
// is then opened only when the first output overflows.
type roots struct {
	work, spill *privatetmp.Root
	spillDir    string
	// workReal is work's path with symlinks resolved, for the scrubbers.
	workReal string
}

// stagingDirs picks the directories the roots are made in.
func (r *Runtime) stagingDirs() (work, spill string) {
	if r.tmpDir != "" {
		return r.tmpDir, r.tmpDir
	}
	spill = os.TempDir()
	if os.Getenv("TMPDIR") == "" && isWritableTmpfs(sharedMemoryDir) {
		return sharedMemoryDir, spill
	}
	return spill, spill
}

func isWritableTmpfs(dir string) bool {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil || st.Type != unix.TMPFS_MAGIC {
		return false
	}
	return unix.Access(dir, unix.W_OK|unix.X_OK) == nil
}

// staging opens the roots on first use (sweeping stale roots left by dead
// processes and reaping expired spills, as a node does at boot) and
// re-validates them on every later use, failing closed.
func (r *Runtime) staging() (roots, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.roots.work != nil {
		return r.roots, r.roots.work.Validate()
	}
	workDir, spillDir := r.stagingDirs()
	work, err := r.openRoot(workDir)
	if err != nil {
		return roots{}, err
	}
	r.roots = roots{work: work}
	r.roots.workReal, _ = filepath.EvalSymlinks(work.Path())
	if spillDir == workDir {
		r.roots.spill = work
	} else {
		r.roots.spillDir = spillDir
		// The spill root opens only with the first overflow, but stale
		// roots of earlier processes in its directory are swept now:
		// otherwise one left holding only its marker (its spills reaped
		// or deleted) would wait for a run that overflows.
		privatetmp.ReapStaleRoots(spillDir, time.Now(), &r.log)
	}
	return r.roots, nil
}

// newSpill opens a spill file in the spill root, opening that root first
// if this is the runtime's first spill. The spill is registered live.
func (r *Runtime) newSpill() (*os.File, error) {
	r.mu.Lock()
	if r.roots.spill == nil {
		root, err := r.openRoot(r.roots.spillDir)
		if err != nil {
			r.mu.Unlock()
			return nil, err
		}
		r.roots.spill = root
	}
	root := r.roots.spill
	r.mu.Unlock()
	// A long-lived host reaps what expired since the last window (at most
	// one per SpillTTL) as it spills again; the check costs a lock and a
	// clock read.
	root.ReapSpills(r.now())
	f, err := root.NewSpill()
	if err == nil {
		r.recordSpill(f)
	}
	return f, err
}

// releaseSpill lets the reaper have a finished capture's spill.
func (r *Runtime) releaseSpill(path string) {
	r.mu.Lock()
	root := r.roots.spill
	r.mu.Unlock()
	if root != nil {
		root.Release(path)
	}
}

func (r *Runtime) openRoot(dir string) (*privatetmp.Root, error) {
	root, err := privatetmp.OpenRoot(privatetmp.RootOptions{TmpDir: dir, Logger: &r.log})
	if err != nil {
		return nil, err
	}
	// Should the host die without Close, its guard removes what is left
	// here once the host's processes are dead (spills excepted).
	if err := r.spawner.GuardRoot(root.Path()); err != nil {
		_ = root.Close()
		return nil, err
	}
	privatetmp.SweepStaleRoots(filepath.Dir(root.Path()), root, &r.log)
	root.ReapSpills(r.now())
	return root, nil
}

// close releases both roots (each is removed only if nothing is left in it).
func (rs roots) close() error {
	if rs.work == nil {
		return nil
	}
	err := rs.work.Close()
	if rs.spill != nil && rs.spill != rs.work {
		err = errors.Join(err, rs.spill.Close())
	}
	return err
}

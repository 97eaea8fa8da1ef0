package privatetmp

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSweepRemovesAnEmptyRootOfADeadOwner(t *testing.T) {
	tmp := t.TempDir()
	plantRoot(t, tmp, "execute-code-private-deadbeef01", markerFor(deadPID(t)))
	current := openTestRoot(t, tmp)

	rep := SweepStaleRoots(tmp, current, nil)

	assert.Equal(t, SweepReport{Examined: 1, Removed: 1}, rep)
	assert.Equal(t, []string{filepath.Base(current.Path())}, names(t, tmp))
}

func TestSweepNeverTraversesOrRemovesANonEmptyDeadRoot(t *testing.T) {
	tmp, outside := t.TempDir(), t.TempDir()
	writePrivate(t, filepath.Join(outside, "precious"), "keep")
	root := plantRoot(t, tmp, "execute-code-private-deadbeef02", markerFor(deadPID(t)))
	// An odd tree: nested dirs, an unreadable dir, a link out, a FIFO, and
	// an old spill below the top level.
	require.NoError(t, os.MkdirAll(filepath.Join(root, "exec-code-x", "rpc-y"), 0o700))
	plantSpill(t, filepath.Join(root, "exec-code-x"), "spill-nested", 72*time.Hour)
	require.NoError(t, os.Mkdir(filepath.Join(root, "locked"), 0o000))
	require.NoError(t, os.Symlink(outside, filepath.Join(root, "link-out")))
	require.NoError(t, syscall.Mkfifo(filepath.Join(root, "fifo"), 0o600))
	before, outsideBefore := snapshot(t, root), snapshot(t, outside)
	current := openTestRoot(t, tmp)

	rep := SweepStaleRoots(tmp, current, nil)

	assert.Equal(t, SweepReport{Examined: 1, Retained: 1}, rep)
	assert.Equal(t, before, snapshot(t, root))
	assert.Equal(t, outsideBefore, snapshot(t, outside))
	assert.Equal(t, []string{root}, current.staleRoot, "handed to the reaper")
}

func TestSweepSkipsRootsThatAreNotProvablyStale(t *testing.T) {
	cases := []struct {
		name  string
		chown bool
		plant func(t *testing.T, tmp string, dead int) string
	}{
		{"owner still alive", false, func(t *testing.T, tmp string, _ int) string {
			return plantRoot(t, tmp, "execute-code-private-alive00001", markerFor(os.Getpid()))
		}},
		{"marker missing", false, func(t *testing.T, tmp string, _ int) string {
			root := filepath.Join(tmp, "execute-code-private-nomarker01")
			require.NoError(t, os.Mkdir(root, 0o700))
			return root
		}},
		{"marker with one line", false, func(t *testing.T, tmp string, dead int) string {
			return plantRoot(t, tmp, "execute-code-private-malformed1", strconv.Itoa(dead)+"\n")
		}},
		{"marker with three lines", false, func(t *testing.T, tmp string, dead int) string {
			return plantRoot(t, tmp, "execute-code-private-malformed2", "n\n"+strconv.Itoa(dead)+"\nextra\n")
		}},
		{"marker pid with trailing text", false, func(t *testing.T, tmp string, dead int) string {
			return plantRoot(t, tmp, "execute-code-private-malformed3", "n\n"+strconv.Itoa(dead)+"x\n")
		}},
		{"marker pid zero", false, func(t *testing.T, tmp string, _ int) string {
			return plantRoot(t, tmp, "execute-code-private-malformed4", "n\n0\n")
		}},
		{"marker pid negative", false, func(t *testing.T, tmp string, dead int) string {
			return plantRoot(t, tmp, "execute-code-private-malformed5", "n\n-"+strconv.Itoa(dead)+"\n")
		}},
		{"marker pid beyond pid_t", false, func(t *testing.T, tmp string, _ int) string {
			return plantRoot(t, tmp, "execute-code-private-malformed6", "n\n99999999999\n")
		}},
		{"marker node empty", false, func(t *testing.T, tmp string, dead int) string {
			return plantRoot(t, tmp, "execute-code-private-malformed7", "\n"+strconv.Itoa(dead)+"\n")
		}},
		{"marker is a symlink to a valid marker", false, func(t *testing.T, tmp string, dead int) string {
			root := filepath.Join(tmp, "execute-code-private-symmarker1")
			require.NoError(t, os.Mkdir(root, 0o700))
			real := filepath.Join(t.TempDir(), "marker")
			writePrivate(t, real, markerFor(dead))
			require.NoError(t, os.Symlink(real, filepath.Join(root, markerName)))
			return root
		}},
		{"marker is a FIFO", false, func(t *testing.T, tmp string, _ int) string {
			root := filepath.Join(tmp, "execute-code-private-fifomarker")
			require.NoError(t, os.Mkdir(root, 0o700))
			require.NoError(t, syscall.Mkfifo(filepath.Join(root, markerName), 0o600))
			return root
		}},
		{"marker is a directory", false, func(t *testing.T, tmp string, _ int) string {
			root := filepath.Join(tmp, "execute-code-private-dirmarker1")
			require.NoError(t, os.MkdirAll(filepath.Join(root, markerName), 0o700))
			return root
		}},
		{"marker mode 0644", false, func(t *testing.T, tmp string, dead int) string {
			root := plantRoot(t, tmp, "execute-code-private-markermode", markerFor(dead))
			require.NoError(t, os.Chmod(filepath.Join(root, markerName), 0o644))
			return root
		}},
		{"root mode 0755", false, func(t *testing.T, tmp string, dead int) string {
			root := plantRoot(t, tmp, "execute-code-private-rootmode01", markerFor(dead))
			require.NoError(t, os.Chmod(root, 0o755))
			return root
		}},
		{"root is a symlink to a dead root", false, func(t *testing.T, tmp string, dead int) string {
			real := plantRoot(t, t.TempDir(), "execute-code-private-elsewhere", markerFor(dead))
			link := filepath.Join(tmp, "execute-code-private-linked0001")
			require.NoError(t, os.Symlink(real, link))
			return link
		}},
		{"root is a file", false, func(t *testing.T, tmp string, dead int) string {
			p := filepath.Join(tmp, "execute-code-private-plainfile1")
			writePrivate(t, p, markerFor(dead))
			return p
		}},
		{"root owned by another uid", true, func(t *testing.T, tmp string, dead int) string {
			root := plantRoot(t, tmp, "execute-code-private-rootowner", markerFor(dead))
			require.NoError(t, os.Lchown(root, nobody, nobody))
			return root
		}},
		{"marker owned by another uid", true, func(t *testing.T, tmp string, dead int) string {
			root := plantRoot(t, tmp, "execute-code-private-markowner", markerFor(dead))
			require.NoError(t, os.Lchown(filepath.Join(root, markerName), nobody, nobody))
			return root
		}},
	}
	dead := deadPID(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.chown {
				requireChown(t)
			}
			tmp := t.TempDir()
			planted := c.plant(t, tmp, dead)
			before := snapshot(t, tmp)

			rep := SweepStaleRoots(tmp, nil, nil)

			assert.Equal(t, SweepReport{Examined: 1, Skipped: 1}, rep)
			assert.Equal(t, before, snapshot(t, tmp))
			_, err := os.Lstat(planted)
			assert.NoError(t, err)
		})
	}
}

func TestSweepIgnoresOtherNamesAndTheCurrentRoot(t *testing.T) {
	tmp := t.TempDir()
	dead := deadPID(t)
	plantRoot(t, tmp, "execute-code-privateXdeadbeef", markerFor(dead))
	plantRoot(t, tmp, "other-dir", markerFor(dead))
	current := openTestRoot(t, tmp)
	// Even if the current root's marker named a dead pid, it is not a sibling.
	writePrivate(t, filepath.Join(current.Path(), markerName), markerFor(dead))
	before := snapshot(t, tmp)

	rep := SweepStaleRoots(tmp, current, nil)

	assert.Equal(t, SweepReport{}, rep)
	assert.Equal(t, before, snapshot(t, tmp))
}

// In a temp dir where this process has no root yet (a lazily opened spill
// root's), the start still sweeps: a stale root holding only its marker
// goes, one whose spills have all expired goes once they are reaped, and
// one with a spill still within its 24 hours stays as it is.
func TestReapStaleRootsWithoutACurrentRoot(t *testing.T) {
	tmp := t.TempDir()
	dead := deadPID(t)
	markerOnly := plantRoot(t, tmp, rootPrefix+"-markeronly", markerFor(dead))
	expired := plantRoot(t, tmp, rootPrefix+"-expiredone", markerFor(dead))
	plantSpill(t, expired, SpillPrefix+"-oldoldoldo", 25*time.Hour)
	fresh := plantRoot(t, tmp, rootPrefix+"-freshspill", markerFor(dead))
	kept := plantSpill(t, fresh, SpillPrefix+"-newnewnewn", time.Hour)

	sweep, reap := ReapStaleRoots(tmp, time.Now(), nil)
	assert.Equal(t, 1, sweep.Removed)
	assert.Equal(t, 1, reap.Removed)
	assert.Equal(t, 1, reap.RootsRemoved)
	assert.NoDirExists(t, markerOnly)
	assert.NoDirExists(t, expired)
	assert.FileExists(t, kept)
	assert.FileExists(t, filepath.Join(fresh, markerName))
}

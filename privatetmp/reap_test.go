package privatetmp

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const old = 25 * time.Hour

func TestReapRemovesOnlyExpiredRegularSpills(t *testing.T) {
	outside := t.TempDir()
	target := plantSpill(t, outside, "spill-target", 72*time.Hour)
	r := openTestRoot(t, t.TempDir())
	root := r.Path()

	expired := plantSpill(t, root, "spill-expired001", old)
	kept := []string{
		plantSpill(t, root, "spill-recent0001", 23*time.Hour),
		plantSpill(t, root, "notes-expired", old),
		plantSpill(t, root, ".spill-hidden", old),
		plantSpill(t, root, "spill", old), // the prefix without its dash
	}
	dir := filepath.Join(root, "spill-a-dir")
	require.NoError(t, os.Mkdir(dir, 0o700))
	plantSpill(t, dir, "spill-nested0001", old)
	setAge(t, dir, old)
	link := filepath.Join(root, "spill-a-link")
	require.NoError(t, os.Symlink(target, link))
	require.NoError(t, os.Chtimes(target, time.Now().Add(-old), time.Now().Add(-old)))
	ws := filepath.Join(root, "exec-code-leftover")
	require.NoError(t, os.Mkdir(ws, 0o700))
	plantSpill(t, ws, "spill-inworkspace", old)
	before := snapshot(t, root)
	delete(before, filepath.Base(expired))
	outsideBefore := snapshot(t, outside)

	rep := r.ReapSpills(time.Now())

	assert.NoFileExists(t, expired)
	assert.Equal(t, before, snapshot(t, root), "everything else is untouched")
	assert.Equal(t, outsideBefore, snapshot(t, outside), "a link's target is never touched")
	for _, p := range kept {
		assert.FileExists(t, p)
	}
	assert.Equal(t, ReapReport{
		Due:      true,
		Examined: 9, // every top-level name, the marker included
		Removed:  1,
		Skipped:  3, // spill-named but kept: the recent spill, the directory, the link
	}, rep)
}

func TestReapNeverTakesALiveSpill(t *testing.T) {
	r := openTestRoot(t, t.TempDir())
	spill := plantSpill(t, r.Path(), "spill-capturing", 72*time.Hour)
	r.MarkLive(spill)
	now := time.Now()

	rep := r.ReapSpills(now)

	assert.FileExists(t, spill)
	assert.Equal(t, 1, rep.Skipped)

	r.Release(spill)
	rep = r.ReapSpills(now.Add(spillTTL))
	assert.NoFileExists(t, spill)
	assert.Equal(t, 1, rep.Removed)
}

func TestReapRunsOncePerWindow(t *testing.T) {
	r := openTestRoot(t, t.TempDir())
	now := time.Now()

	assert.True(t, r.ReapSpills(now).Due, "the first window starts at once")
	spill := plantSpill(t, r.Path(), "spill-late00001", old)
	rep := r.ReapSpills(now.Add(spillTTL - time.Second))
	assert.Equal(t, ReapReport{}, rep)
	assert.FileExists(t, spill)

	rep = r.ReapSpills(now.Add(spillTTL))
	assert.True(t, rep.Due)
	assert.NoFileExists(t, spill)
}

func TestReapCarriesTheBudgetOverToTheNextWindow(t *testing.T) {
	r := openTestRoot(t, t.TempDir())
	for i := range 1500 {
		plantSpill(t, r.Path(), fmt.Sprintf("spill-%010d", i), old)
	}
	now := time.Now()

	first := r.ReapSpills(now)

	assert.Equal(t, reapBatch, first.Examined)
	assert.LessOrEqual(t, first.Removed, reapBatch)
	assert.Equal(t, 999, first.Removed, "the marker took one unit of the budget")
	assert.Equal(t, 501, first.Continued)
	assert.Len(t, names(t, r.Path()), 1+501)

	second := r.ReapSpills(now.Add(spillTTL))

	assert.Equal(t, 501, second.Examined)
	assert.Equal(t, 501, second.Removed)
	assert.Equal(t, 0, second.Continued)
	assert.Equal(t, []string{markerName}, names(t, r.Path()))
}

func TestReapSweepsTheCurrentRootBeforeAnyStaleRoot(t *testing.T) {
	tmp := t.TempDir()
	stale := plantRoot(t, tmp, "execute-code-private-deadbeef03", markerFor(deadPID(t)))
	staleSpills := []string{
		plantSpill(t, stale, "spill-stale00001", old),
		plantSpill(t, stale, "spill-stale00002", old),
	}
	r := openTestRoot(t, tmp)
	for i := range 1099 { // with the marker: 1,100 names, a full window and 100 more
		plantSpill(t, r.Path(), fmt.Sprintf("spill-%010d", i), old)
	}
	require.Equal(t, SweepReport{Examined: 1, Retained: 1}, SweepStaleRoots(tmp, r, nil))
	now := time.Now()

	first := r.ReapSpills(now)

	assert.Equal(t, reapBatch, first.Examined)
	for _, p := range staleSpills {
		assert.FileExists(t, p, "the current root used the whole budget")
	}

	second := r.ReapSpills(now.Add(spillTTL))

	assert.Equal(t, 100+3, second.Examined, "the rest of the current root, then the stale root")
	assert.Equal(t, 100+2, second.Removed)
	assert.Equal(t, 1, second.RootsRemoved, "a stale root left with only its marker is removed")
	assert.NoDirExists(t, stale)
	assert.Equal(t, []string{markerName}, names(t, r.Path()))
}

func TestReapLeavesAStaleRootWithOtherContentAndNeverDescends(t *testing.T) {
	tmp := t.TempDir()
	stale := plantRoot(t, tmp, "execute-code-private-deadbeef04", markerFor(deadPID(t)))
	top := plantSpill(t, stale, "spill-top0000001", old)
	ws := filepath.Join(stale, "exec-code-leftover")
	require.NoError(t, os.Mkdir(ws, 0o700))
	nested := plantSpill(t, ws, "spill-nested0001", old)
	r := openTestRoot(t, tmp)
	SweepStaleRoots(tmp, r, nil)
	before := snapshot(t, stale)
	delete(before, filepath.Base(top))

	rep := r.ReapSpills(time.Now())

	assert.NoFileExists(t, top)
	assert.FileExists(t, nested)
	assert.Equal(t, before, snapshot(t, stale))
	assert.Equal(t, 0, rep.RootsRemoved)
	assert.FileExists(t, filepath.Join(stale, markerName))
}

func TestReapDropsAStaleRootWhoseOwnerIsNoLongerProvablyDead(t *testing.T) {
	tmp := t.TempDir()
	stale := plantRoot(t, tmp, "execute-code-private-deadbeef05", markerFor(deadPID(t)))
	spill := plantSpill(t, stale, "spill-stale00001", old)
	r := openTestRoot(t, tmp)
	SweepStaleRoots(tmp, r, nil)
	// Re-validation at reap time sees a live owner (pid reuse, or a node
	// that claimed the root): the root is not ours to sweep.
	writePrivate(t, filepath.Join(stale, markerName), markerFor(os.Getpid()))

	rep := r.ReapSpills(time.Now())

	assert.FileExists(t, spill)
	assert.Equal(t, 0, rep.Removed)
	assert.Empty(t, r.staleRoot)
}

func TestReapSkipsACurrentRootThatFailsValidation(t *testing.T) {
	r := openTestRoot(t, t.TempDir())
	spill := plantSpill(t, r.Path(), "spill-expired001", old)
	require.NoError(t, os.Chmod(r.Path(), 0o755))

	rep := r.ReapSpills(time.Now())

	assert.FileExists(t, spill)
	assert.Equal(t, 0, rep.Examined)
}

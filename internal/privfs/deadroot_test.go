package privfs

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// deadRoot plants a staging root owned by pid holding a workspace, a
// spill and whatever extra adds.
func deadRoot(t *testing.T, pid int) (tmp, root string) {
	t.Helper()
	tmp = t.TempDir()
	root = filepath.Join(tmp, RootPrefix+"-AAAAAAAAAA")
	require.NoError(t, os.Mkdir(root, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(root, MarkerName), FormatMarker("node", pid), 0o600))
	ws := filepath.Join(root, "lemon-exec-code-BBBBBBBBBB")
	require.NoError(t, os.MkdirAll(filepath.Join(ws, "rpc"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "lemon_tools.py"), []byte("TOKEN = 'secret'"), 0o600))
	return tmp, root
}

func TestRemoveDeadRootRemovesEverythingAndTheRoot(t *testing.T) {
	tmp, root := deadRoot(t, 4242)
	rep, err := RemoveDeadRoot(root, 4242, 1000)
	require.NoError(t, err)
	assert.True(t, rep.RootGone)
	entries, _ := os.ReadDir(tmp)
	assert.Empty(t, entries)
}

func TestRemoveDeadRootKeepsSpillsAndTheMarker(t *testing.T) {
	_, root := deadRoot(t, 4242)
	spill := filepath.Join(root, SpillPrefix+"-CCCCCCCCCC")
	require.NoError(t, os.WriteFile(spill, []byte("full output"), 0o600))
	// Named like a spill, but a directory: removed.
	require.NoError(t, os.Mkdir(filepath.Join(root, SpillPrefix+"-DDDDDDDDDD"), 0o700))
	rep, err := RemoveDeadRoot(root, 4242, 1000)
	require.NoError(t, err)
	assert.False(t, rep.RootGone)
	assert.Equal(t, 1, rep.Spills)
	names := readNames(t, root)
	assert.ElementsMatch(t, []string{MarkerName, filepath.Base(spill)}, names)
}

func TestRemoveDeadRootNeverFollowsALink(t *testing.T) {
	_, root := deadRoot(t, 4242)
	outside := t.TempDir()
	victim := filepath.Join(outside, "keep.txt")
	require.NoError(t, os.WriteFile(victim, []byte("keep"), 0o600))
	require.NoError(t, os.Symlink(outside, filepath.Join(root, "lemon-exec-code-link")))
	require.NoError(t, os.Symlink(victim, filepath.Join(root, SpillPrefix+"-EEEEEEEEEE")))
	rep, err := RemoveDeadRoot(root, 4242, 1000)
	require.NoError(t, err)
	assert.True(t, rep.RootGone, "links are unlinked, so nothing is left")
	assert.FileExists(t, victim, "a link's target is never touched")
}

func TestRemoveDeadRootRefusesWhatIsNotTheDeadHostsRoot(t *testing.T) {
	t.Run("another owner", func(t *testing.T) {
		_, root := deadRoot(t, 4242)
		_, err := RemoveDeadRoot(root, 4243, 1000)
		assert.True(t, errors.Is(err, ErrUnsafe), "%v", err)
		assert.DirExists(t, filepath.Join(root, "lemon-exec-code-BBBBBBBBBB"))
	})
	t.Run("a symlinked root", func(t *testing.T) {
		_, real := deadRoot(t, 4242)
		link := filepath.Join(t.TempDir(), RootPrefix+"-LLLLLLLLLL")
		require.NoError(t, os.Symlink(real, link))
		_, err := RemoveDeadRoot(link, 4242, 1000)
		assert.True(t, errors.Is(err, ErrUnsafe), "%v", err)
		assert.DirExists(t, filepath.Join(real, "lemon-exec-code-BBBBBBBBBB"))
	})
	t.Run("a loose mode", func(t *testing.T) {
		_, root := deadRoot(t, 4242)
		require.NoError(t, os.Chmod(root, 0o755))
		_, err := RemoveDeadRoot(root, 4242, 1000)
		assert.True(t, errors.Is(err, ErrUnsafe), "%v", err)
		assert.DirExists(t, filepath.Join(root, "lemon-exec-code-BBBBBBBBBB"))
	})
	t.Run("not a staging root name", func(t *testing.T) {
		tmp, _ := deadRoot(t, 4242)
		_, err := RemoveDeadRoot(tmp, 4242, 1000)
		assert.True(t, errors.Is(err, ErrUnsafe), "%v", err)
		_, err = RemoveDeadRoot(tmp+"/x/../"+RootPrefix+"-AAAAAAAAAA", 4242, 1000)
		assert.True(t, errors.Is(err, ErrUnsafe), "%v", err)
	})
}

// A root the budget cannot empty keeps its marker, so a later start still
// knows it for a dead process's root.
func TestRemoveDeadRootOutOfBudgetKeepsTheMarker(t *testing.T) {
	_, root := deadRoot(t, 4242)
	for i := range 50 {
		require.NoError(t, os.WriteFile(filepath.Join(root, "lemon-exec-code-BBBBBBBBBB", "f"+strconv.Itoa(i)), nil, 0o600))
	}
	rep, err := RemoveDeadRoot(root, 4242, 10)
	require.NoError(t, err)
	assert.False(t, rep.RootGone)
	assert.FileExists(t, filepath.Join(root, MarkerName))
}

func readNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

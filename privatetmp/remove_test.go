package privatetmp

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fillDir creates n empty files in dir.
func fillDir(t *testing.T, dir string, n int) {
	t.Helper()
	for i := range n {
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("f%05d", i)), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
}

func TestRemoveBoundedHonoursTheBudgetExactly(t *testing.T) {
	cases := []struct {
		files, limit int
		complete     bool
		left         int // files left inside when incomplete
	}{
		{files: 1, limit: 3, complete: true},
		{files: 1, limit: 2, complete: false, left: 0},
		{files: 0, limit: 2, complete: true},
		{files: 0, limit: 1, complete: false, left: 0},
		{files: 50, limit: 10, complete: false, left: 41},
		{files: 50, limit: 52, complete: true},
		{files: 50, limit: 51, complete: false, left: 0},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%d files limit %d", c.files, c.limit), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "ws")
			require.NoError(t, os.Mkdir(dir, 0o700))
			fillDir(t, dir, c.files)

			complete, err := RemoveBounded(dir, c.limit)

			require.NoError(t, err)
			assert.Equal(t, c.complete, complete)
			if c.complete {
				assert.NoDirExists(t, dir)
			} else {
				assert.DirExists(t, dir)
				assert.Len(t, names(t, dir), c.left)
			}
		})
	}
}

func TestRemoveBoundedStopsAtTheLimitOnAHugeTree(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ws")
	require.NoError(t, os.Mkdir(dir, 0o700))
	fillDir(t, dir, 12000)

	complete, err := RemoveBounded(dir, RemoveLimit)

	require.NoError(t, err)
	assert.False(t, complete)
	// One visit lists the directory, the other 9,999 each remove a file.
	assert.Len(t, names(t, dir), 12000-(RemoveLimit-1))
}

func TestRemoveBoundedRemovesLinksNeverTheirTargets(t *testing.T) {
	outside := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(outside, "dir"), 0o700))
	writePrivate(t, filepath.Join(outside, "dir", "precious"), "keep")
	writePrivate(t, filepath.Join(outside, "file"), "keep")
	before := snapshot(t, outside)

	ws := filepath.Join(t.TempDir(), "ws")
	require.NoError(t, os.MkdirAll(filepath.Join(ws, "a", "b", "c"), 0o700))
	writePrivate(t, filepath.Join(ws, "a", "b", "c", "deep"), "x")
	require.NoError(t, os.Symlink(filepath.Join(outside, "dir"), filepath.Join(ws, "to-dir")))
	require.NoError(t, os.Symlink(filepath.Join(outside, "file"), filepath.Join(ws, "a", "to-file")))
	require.NoError(t, os.Symlink(outside, filepath.Join(ws, "a", "b", "to-outside")))
	require.NoError(t, os.Symlink("/nonexistent", filepath.Join(ws, "dangling")))

	complete, err := RemoveBounded(ws, RemoveLimit)

	require.NoError(t, err)
	assert.True(t, complete)
	assert.NoDirExists(t, ws)
	assert.Equal(t, before, snapshot(t, outside))
}

func TestRemoveBoundedOfASymlinkRemovesOnlyTheLink(t *testing.T) {
	outside := t.TempDir()
	writePrivate(t, filepath.Join(outside, "precious"), "keep")
	link := filepath.Join(t.TempDir(), "ws")
	require.NoError(t, os.Symlink(outside, link))

	complete, err := RemoveBounded(link, RemoveLimit)

	require.NoError(t, err)
	assert.True(t, complete)
	_, err = os.Lstat(link)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.FileExists(t, filepath.Join(outside, "precious"))
}

func TestRemoveBoundedCompletesDeepTrees(t *testing.T) {
	ws := filepath.Join(t.TempDir(), "ws")
	deep := ws
	for i := range 200 {
		deep = filepath.Join(deep, fmt.Sprintf("d%d", i))
	}
	require.NoError(t, os.MkdirAll(deep, 0o700))
	writePrivate(t, filepath.Join(deep, "leaf"), "x")

	complete, err := RemoveBounded(ws, RemoveLimit)

	require.NoError(t, err)
	assert.True(t, complete)
	assert.NoDirExists(t, ws)
}

func TestRemoveBoundedToleratesMissingPaths(t *testing.T) {
	for _, p := range []string{
		filepath.Join(t.TempDir(), "gone"),
		filepath.Join(t.TempDir(), "no-parent", "gone"),
	} {
		complete, err := RemoveBounded(p, RemoveLimit)
		assert.NoError(t, err)
		assert.True(t, complete)
	}
}

func TestRemoveBoundedRefusesPathsThatAreNotATree(t *testing.T) {
	for _, p := range []string{"", "/", ".", "..", "/tmp/.."} {
		_, err := RemoveBounded(p, RemoveLimit)
		assert.ErrorIs(t, err, fs.ErrInvalid, "path %q", p)
	}
}

func TestTeardownWarnsWithoutAPathWhenTheLimitLeavesARemainder(t *testing.T) {
	ws := filepath.Join(t.TempDir(), "exec-code-XXXXXXXXXX")
	require.NoError(t, os.Mkdir(ws, 0o700))
	fillDir(t, ws, RemoveLimit+1)
	var buf bytes.Buffer
	logger := zerolog.New(&buf)

	gone := Teardown(ws, LabelWorkspace, &logger)

	assert.False(t, gone)
	assert.Contains(t, buf.String(),
		"execute_code workspace teardown hit the entry limit; remainder left under the private root")
	assert.Contains(t, buf.String(), `"level":"warn"`)
	assert.NotContains(t, buf.String(), filepath.Dir(ws))
	assert.NotContains(t, buf.String(), "exec-code-")
}

func TestTeardownIsQuietWhenTheTreeIsGone(t *testing.T) {
	ws := filepath.Join(t.TempDir(), "bridge")
	require.NoError(t, os.MkdirAll(filepath.Join(ws, "rpc-x"), 0o700))
	var buf bytes.Buffer
	logger := zerolog.New(&buf)

	assert.True(t, Teardown(ws, LabelCellBridge, &logger))
	assert.NoDirExists(t, ws)
	assert.Empty(t, strings.TrimSpace(buf.String()))
}

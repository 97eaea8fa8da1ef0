package registry

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every change of the file system that changes what NewKey answers must
// change what the cache answers, on the very next key.
func TestKeyCacheAnswersWhatNewKeyAnswers(t *testing.T) {
	f := newKeyFixture(t)
	// A private copy of the executable, so its mode can change.
	exe := filepath.Join(filepath.Dir(f.dir), "python")
	data, err := os.ReadFile(f.exe)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(exe, data, 0o700))
	exeLink := filepath.Join(filepath.Dir(f.dir), "python3")
	require.NoError(t, os.Symlink(exe, exeLink))
	other := filepath.Join(filepath.Dir(f.dir), "other")
	require.NoError(t, os.Mkdir(other, 0o700))

	var c KeyCache
	same := func(step string) {
		t.Helper()
		want, wantErr := NewKey("s", "a", f.dirLink, exeLink, []string{"read", "grep"})
		for range 2 { // the first resolves and remembers, the second is remembered
			got, err := c.NewKey("s", "a", f.dirLink, exeLink, []string{"read", "grep"})
			if wantErr != nil {
				assert.Error(t, err, step)
				assert.ErrorIs(t, err, ErrInvalidKey, step)
				continue
			}
			require.NoError(t, err, step)
			assert.True(t, want.Equal(got), "%s: %+v, want %+v", step, got, want)
			assert.Equal(t, want.Digest(), got.Digest(), step)
		}
	}
	same("first")

	require.NoError(t, os.Remove(f.dirLink))
	require.NoError(t, os.Symlink(other, f.dirLink))
	same("cwd link retargeted")

	require.NoError(t, os.Remove(other))
	same("cwd removed")

	require.NoError(t, os.Mkdir(other, 0o700))
	same("cwd made again (another directory at the same path)")

	require.NoError(t, os.Chmod(exe, 0o600))
	same("interpreter no longer executable")

	require.NoError(t, os.Chmod(exe, 0o700))
	require.NoError(t, os.Remove(exeLink))
	require.NoError(t, os.Symlink(f.exe, exeLink))
	same("interpreter link retargeted")

	require.NoError(t, os.Remove(exeLink))
	same("interpreter link removed")

	require.NoError(t, os.Symlink(exe, exeLink))
	same("interpreter link made again")
}

// A change that keeps the file a path names and only respells where it
// resolves keeps the remembered spelling: the same directory, the same
// kernel.
func TestKeyCacheKeepsTheSpellingOfTheSameFile(t *testing.T) {
	f := newKeyFixture(t)
	var c KeyCache
	first, err := c.NewKey("s", "a", f.dirLink, f.exe, nil)
	require.NoError(t, err)
	require.NoError(t, os.Rename(f.dir, f.dir+".old"))
	require.NoError(t, os.Symlink(f.dir+".old", f.dir))
	again, err := c.NewKey("s", "a", f.dirLink, f.exe, nil)
	require.NoError(t, err)
	assert.Equal(t, first.Cwd, again.Cwd)
	fresh, err := NewKey("s", "a", f.dirLink, f.exe, nil)
	require.NoError(t, err)
	assert.Equal(t, f.dir+".old", fresh.Cwd)
}

// A relative path depends on the current directory, a bare interpreter
// name on PATH: neither is remembered.
func TestKeyCacheResolvesRelativePathsEveryTime(t *testing.T) {
	f := newKeyFixture(t)
	t.Setenv("PATH", f.binDir)
	t.Chdir(filepath.Dir(f.dir))
	var c KeyCache
	k, err := c.NewKey("s", "a", "work", f.exeBin, nil)
	require.NoError(t, err)
	assert.Equal(t, f.dir, k.Cwd)
	assert.Empty(t, c.paths)

	t.Chdir(f.dir)
	require.NoError(t, os.Mkdir(filepath.Join(f.dir, "work"), 0o700))
	k, err = c.NewKey("s", "a", "work", f.exeBin, nil)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(f.dir, "work"), k.Cwd)
}

func TestKeyCacheRefusesWhatNewKeyRefuses(t *testing.T) {
	f := newKeyFixture(t)
	var c KeyCache
	_, err := c.NewKey("s", "a", f.dir, f.exe, nil)
	require.NoError(t, err)
	for name, k := range map[string][3]string{
		"blank scope":  {" ", "a", ""},
		"blank agent":  {"s", "", ""},
		"empty helper": {"s", "a", "helper"},
	} {
		helpers := []string{"read"}
		if k[2] != "" {
			helpers = []string{"read", ""}
		}
		_, err := c.NewKey(k[0], k[1], f.dir, f.exe, helpers)
		assert.ErrorIs(t, err, ErrInvalidKey, name)
	}
}

package proc

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/internal/proctest"
)

// The derived read set holds the interpreter's own trees, its libraries
// by exact path and a virtualenv's pyvenv.cfg, and no directory that
// would open the system: not /, /usr, /usr/lib, /etc or a home.
func TestTheReadSetIsTheInterpretersOwnFilesOnly(t *testing.T) {
	base := proctest.Python(t)
	venv := filepath.Join(t.TempDir(), "venv")
	out, err := exec.Command(base, "-m", "venv", "--without-pip", venv).CombinedOutput()
	require.NoError(t, err, "%s", out)
	home, _ := os.UserHomeDir()
	broad := []string{"/", "/usr", "/usr/lib", "/usr/lib/x86_64-linux-gnu", "/lib", "/etc", "/tmp", os.TempDir(), home}

	sp := NewSpawner()
	defer sp.Close()
	for _, python := range []string{base, filepath.Join(venv, "bin", "python3")} {
		rs, err := sp.DeriveReadSet(context.Background(), python, os.Environ())
		require.NoError(t, err, python)
		real, err := filepath.EvalSymlinks(python)
		require.NoError(t, err)
		assert.Equal(t, real, rs.Exec[0], "the real binary is executable")
		require.Len(t, rs.Exec, 2, "and its ELF interpreter")
		for _, p := range rs.Read {
			assert.NotContains(t, broad, p, "%s: a read rule that opens the system", python)
			assert.True(t, filepath.IsAbs(p), p)
		}
		assert.True(t, slices.ContainsFunc(rs.Read, func(p string) bool { return filepath.Base(p) == "libc.so.6" }), "libc by its path")
		if filepath.Dir(filepath.Dir(python)) == venv {
			assert.Contains(t, rs.Read, filepath.Join(venv, "pyvenv.cfg"), "a virtualenv dies without its pyvenv.cfg")
			site, err := filepath.Glob(filepath.Join(venv, "lib", "python3*", "site-packages"))
			require.NoError(t, err)
			require.Len(t, site, 1)
			assert.True(t, slices.ContainsFunc(rs.Read, func(p string) bool { return Within(site[0], p) }), "its site-packages")
		}
		again, err := sp.DeriveReadSet(context.Background(), python, os.Environ())
		require.NoError(t, err)
		assert.Equal(t, rs, again)
	}
}

func TestCollapseKeepsOnlyTheOutermostOfNestedPaths(t *testing.T) {
	got := collapse([]string{"/a/b/c", "/a/b", "/a/b-c", "/a/b/c/d", "/x", "/a/b"})
	assert.Equal(t, []string{"/a/b", "/a/b-c", "/x"}, got)
	assert.True(t, Within("/a/b", "/"))
	assert.False(t, Within("/a/bc", "/a/b"))
}

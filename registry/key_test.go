package registry

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// keyFixture is a real directory and a real executable file (this test
// binary; it is never run), each also reachable through a symlink.
type keyFixture struct {
	dir, dirLink   string
	exe, exeLink   string
	binDir, exeBin string // a PATH directory holding exeBin -> exe
}

func newKeyFixture(t *testing.T) keyFixture {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	exe, err := os.Executable()
	require.NoError(t, err)
	exe, err = filepath.EvalSymlinks(exe)
	require.NoError(t, err)
	f := keyFixture{
		dir:     filepath.Join(root, "work"),
		dirLink: filepath.Join(root, "work-link"),
		exe:     exe,
		exeLink: filepath.Join(root, "python-link"),
		binDir:  filepath.Join(root, "bin"),
	}
	require.NoError(t, os.Mkdir(f.dir, 0o700))
	require.NoError(t, os.Symlink(f.dir, f.dirLink))
	require.NoError(t, os.Symlink(exe, f.exeLink))
	require.NoError(t, os.Mkdir(f.binDir, 0o700))
	f.exeBin = "registry-test-python"
	require.NoError(t, os.Symlink(exe, filepath.Join(f.binDir, f.exeBin)))
	return f
}

func TestKeysOfEquivalentInputsAreEqual(t *testing.T) {
	f := newKeyFixture(t)
	t.Setenv("PATH", f.binDir)
	base, err := NewKey("s", "a", f.dir, f.exe, []string{"grep", "read"})
	require.NoError(t, err)

	cases := map[string]struct {
		cwd, interp string
		helpers     []string
	}{
		"symlinked cwd":               {f.dirLink, f.exe, []string{"grep", "read"}},
		"cwd with dot-dot":            {filepath.Join(f.dir, "..", "work", "."), f.exe, []string{"grep", "read"}},
		"symlinked interpreter":       {f.dir, f.exeLink, []string{"grep", "read"}},
		"bare interpreter on PATH":    {f.dir, f.exeBin, []string{"grep", "read"}},
		"helpers unordered with dups": {f.dir, f.exe, []string{"read", "grep", "read"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			k, err := NewKey("s", "a", c.cwd, c.interp, c.helpers)
			require.NoError(t, err)
			assert.True(t, base.Equal(k))
			assert.Equal(t, base.Digest(), k.Digest())
		})
	}
	assert.Equal(t, f.dir, base.Cwd)
	assert.Equal(t, f.exe, base.Interpreter)
	assert.Equal(t, []string{"grep", "read"}, base.Helpers)
	assert.Equal(t, 1, base.ProtocolVersion)
}

func TestRelativeAndHomePathsAreMadeAbsolute(t *testing.T) {
	f := newKeyFixture(t)
	t.Chdir(filepath.Dir(f.dir))
	k, err := NewKey("s", "a", "work", "./python-link", nil)
	require.NoError(t, err)
	assert.Equal(t, f.dir, k.Cwd)
	assert.Equal(t, f.exe, k.Interpreter)

	t.Setenv("HOME", filepath.Dir(f.dir))
	k, err = NewKey("s", "a", "~/work", "~/python-link", nil)
	require.NoError(t, err)
	assert.Equal(t, f.dir, k.Cwd)
	assert.Equal(t, f.exe, k.Interpreter)
}

func TestChangingAnyKeyComponentChangesTheDigest(t *testing.T) {
	base := Key{ScopeID: "s", AgentID: "a", Cwd: "/w", Interpreter: "/p", Helpers: []string{"read"}, ProtocolVersion: 1}
	variants := map[string]func(*Key){
		"scope":    func(k *Key) { k.ScopeID = "s2" },
		"agent":    func(k *Key) { k.AgentID = "a2" },
		"cwd":      func(k *Key) { k.Cwd = "/w2" },
		"interp":   func(k *Key) { k.Interpreter = "/p2" },
		"helpers":  func(k *Key) { k.Helpers = []string{"read", "grep"} },
		"no help":  func(k *Key) { k.Helpers = nil },
		"protocol": func(k *Key) { k.ProtocolVersion = 2 },
		"tool set": func(k *Key) { k.ToolSet = "d1" },
		"sandbox":  func(k *Key) { k.Sandbox = "landlock" },
	}
	for name, change := range variants {
		t.Run(name, func(t *testing.T) {
			k := base
			k.Helpers = append([]string(nil), base.Helpers...)
			change(&k)
			assert.NotEqual(t, base.Digest(), k.Digest())
			assert.False(t, base.Equal(k))
		})
	}
}

func TestDigestReproducesTheReferenceVectors(t *testing.T) {
	k := Key{ScopeID: "s", AgentID: "a", Cwd: "/tmp", Interpreter: "/usr/bin/python3.11",
		Helpers: []string{"grep", "read"}, ProtocolVersion: 1}
	assert.Equal(t, "1b08a2f9c000830cd57ae1437ddfe9ff7deda7551aeb3749bcd6e006d8b7bdbc", k.Digest())
	k.Helpers = []string{}
	assert.Equal(t, "943e38e95e897a0d8d111632acd1ef0a663bf16ed1f7d236dd3849ce4b060d14", k.Digest())
	k.ToolSet = "d1"
	other := k
	other.ToolSet = "d2"
	assert.NotEqual(t, k.Digest(), other.Digest(), "host tool sets that differ key different kernels")
	assert.False(t, k.Equal(other))
}

func TestNewKeyRejectsBadInputNamingTheField(t *testing.T) {
	f := newKeyFixture(t)
	t.Setenv("PATH", f.binDir)
	plain := filepath.Join(f.dir, "plain.txt")
	require.NoError(t, os.WriteFile(plain, []byte("x"), 0o600))
	cases := []struct {
		name                      string
		scope, agent, cwd, interp string
		helpers                   []string
		field                     string
	}{
		{"blank scope", "  ", "a", f.dir, f.exe, nil, "invalid_scope_id"},
		{"empty scope", "", "a", f.dir, f.exe, nil, "invalid_scope_id"},
		{"blank agent", "s", "\t", f.dir, f.exe, nil, "invalid_agent_id"},
		{"empty cwd", "s", "a", "", f.exe, nil, "cwd_not_found"},
		{"missing cwd", "s", "a", filepath.Join(f.dir, "nope"), f.exe, nil, "cwd_not_found"},
		{"cwd is a file", "s", "a", plain, f.exe, nil, "cwd_not_directory"},
		{"empty interpreter", "s", "a", f.dir, "", nil, "interpreter_not_found"},
		{"missing interpreter", "s", "a", f.dir, filepath.Join(f.dir, "nope"), nil, "interpreter_not_found"},
		{"interpreter not on PATH", "s", "a", f.dir, "no-such-python-here", nil, "interpreter_not_found"},
		{"interpreter not executable", "s", "a", f.dir, plain, nil, "interpreter_not_executable"},
		{"interpreter is a directory", "s", "a", f.dir, f.dir, nil, "interpreter_not_executable"},
		{"empty helper name", "s", "a", f.dir, f.exe, []string{"read", ""}, "invalid_helper"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewKey(c.scope, c.agent, c.cwd, c.interp, c.helpers)
			require.ErrorIs(t, err, ErrInvalidKey)
			assert.True(t, strings.Contains(err.Error(), c.field), "error %q should name %s", err, c.field)
		})
	}
}

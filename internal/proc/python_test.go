package proc

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/internal/proctest"
)

func writeScript(t *testing.T, dir, body string) string {
	t.Helper()
	p := filepath.Join(dir, "python3")
	require.NoError(t, os.WriteFile(p, []byte(body), 0o755))
	return p
}

func TestResolvePythonChecksTheConfiguredPath(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	require.NoError(t, os.WriteFile(plain, []byte("data"), 0o644))
	missing := filepath.Join(dir, "missing")
	link := filepath.Join(dir, "link")
	require.NoError(t, os.Symlink(proctest.Python(t), link))

	tests := []struct {
		name, path, want string
		kind             error
	}{
		{"missing", missing, "configured execute_code python_path not found: " + missing, ErrPythonNotFound},
		{"not executable", plain, "configured execute_code python_path is not an executable file: " + plain, ErrPythonNotExecutable},
		{"directory", dir, "configured execute_code python_path is not an executable file: " + dir, ErrPythonNotExecutable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ResolvePython(tc.path)
			require.Error(t, err)
			assert.Equal(t, tc.want, err.Error())
			assert.ErrorIs(t, err, tc.kind)
		})
	}
	t.Run("missing wraps the stat error", func(t *testing.T) {
		_, err := ResolvePython(missing)
		assert.ErrorIs(t, err, fs.ErrNotExist)
	})
	t.Run("a symlink is followed but returned as configured", func(t *testing.T) {
		got, err := ResolvePython(link)
		require.NoError(t, err)
		assert.Equal(t, link, got)
	})
}

func TestResolvePythonSkipsShimScriptsOnPath(t *testing.T) {
	real := proctest.Python(t)
	shims := t.TempDir()
	// A shim that must never be chosen (nor needed) while a real
	// interpreter follows it on PATH.
	writeScript(t, shims, "#!/bin/sh\nexit 3\n")
	t.Setenv("PATH", shims+string(os.PathListSeparator)+filepath.Dir(real))

	got, err := ResolvePython("")
	require.NoError(t, err)
	assert.Equal(t, real, got)
}

func TestResolvePythonAsksAShimForItsInterpreter(t *testing.T) {
	real := proctest.Python(t)
	shims := t.TempDir()
	writeScript(t, shims, "#!/bin/sh\nexec '"+real+"' \"$@\"\n")
	t.Setenv("PATH", shims)

	got, err := ResolvePython("")
	require.NoError(t, err)
	assert.NotEqual(t, filepath.Join(shims, "python3"), got)
	gotInfo, err := os.Stat(got)
	require.NoError(t, err)
	realInfo, err := os.Stat(real)
	require.NoError(t, err)
	assert.True(t, os.SameFile(gotInfo, realInfo), "%s is not %s", got, real)
}

func TestResolvePythonReportsMissingPython(t *testing.T) {
	const want = "python3 was not found on this host. execute_code requires python3; " +
		"install it or set [runtime.tools.execute_code] python_path."
	broken := t.TempDir()
	writeScript(t, broken, "#!/bin/sh\necho not-a-path\n")
	notExec := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(notExec, "python3"), []byte("\x7fELF"), 0o644))

	for name, path := range map[string]string{
		"empty PATH":             "",
		"only relative entries":  "bin:.",
		"shim printing nonsense": broken,
		"python3 not executable": notExec,
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv("PATH", path)
			_, err := ResolvePython("")
			require.Error(t, err)
			assert.Equal(t, want, err.Error())
			assert.ErrorIs(t, err, ErrPythonNotFound)
		})
	}
}

package integration

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The first warning of a fresh kernel shows its source line, as every
// later one does and as a per-call run's does.
func TestSessionFirstWarningShowsItsSourceLine(t *testing.T) {
	// Cell line numbers count the helpers' import line before the script.
	e := sessionEnv(t, nil)
	o := e.attach("warn")
	first := e.cell(o, "import sys\nassert 'linecache' not in sys.modules, 'needs a kernel without linecache'\nimport warnings\nwarnings.warn('first')\nwarnings.warn('second')\n").Text()
	assert.Contains(t, first, "<cell>:5: UserWarning: first\n  warnings.warn('first')\n")
	assert.Contains(t, first, "<cell>:6: UserWarning: second\n  warnings.warn('second')\n")
	later := e.cell(o, "import warnings\n\nwarnings.warn('careful')\n").Text()
	assert.Contains(t, later, "<cell>:4: UserWarning: careful\n  warnings.warn('careful')\n")
}

// A cell sees no host path in sys.argv or sys.orig_argv: the runner's
// location is the host's business (docs/decisions.md).
func TestSessionArgvNamesNoHostPath(t *testing.T) {
	e := sessionEnv(t, nil)
	o := e.attach("argv")
	res := e.cell(o, "import sys\ntext(repr(sys.argv))\ntext(repr(sys.orig_argv[1:]))\ntext(repr([p for p in sys.orig_argv if 'runner' in p]))\n")
	require.Len(t, res.Blocks, 3, res.Text())
	assert.Equal(t, []string{"['']", "[]", "[]"}, res.Blocks)
	assert.NotContains(t, res.Text(), "<workspace>")
}

// Each cell starts in the kernel's working directory, whatever the cell
// before it did with os.chdir (unlike a Jupyter kernel, which keeps the
// new directory): the directory is part of the kernel's key.
func TestSessionCellStartsInTheKernelDirectoryAfterAChdir(t *testing.T) {
	e := sessionEnv(t, map[string]string{"sub/marker.txt": "x"})
	o := e.attach("cwd")
	first := e.cell(o, "import os\nstart = os.getcwd()\nos.chdir('sub')\ntext(str(os.path.exists('marker.txt')))\n")
	assert.Equal(t, []string{"True"}, first.Blocks)
	second := e.cell(o, "import os\ntext(str(os.getcwd() == start))\ntext(str(os.path.exists('sub/marker.txt')))\n")
	assert.Equal(t, []string{"True", "True"}, second.Blocks)
	root, err := filepath.EvalSymlinks(e.root)
	require.NoError(t, err)
	third := e.cell(o, "import os\ntext(os.path.realpath(os.getcwd()))\n")
	assert.Equal(t, []string{root}, third.Blocks)
}

// What a cell wrote just before it ended its kernel with os._exit
// reaches its result, as a per-call run's output does: the kernel's
// os._exit waits for the runner's drain of the capture pipe. Each cell is
// a fresh kernel, so a race would get many chances. (After a signal, what
// the runner never drained is read by the host: kernelworker's
// TestWhatADeadKernelNeverDrainedReachesItsCell.)
func TestSessionOutputBeforeOsExitIsKept(t *testing.T) {
	const script = "import os, sys\nprint('before exit', flush=True)\nos.write(2, b'raw stderr\\n')\nos._exit(7)\n"
	res := newEnv(t, nil).run(script)
	require.Contains(t, res.Text(), "before exit\nraw stderr\n")
	e := sessionEnv(t, nil)
	o := e.attach("exit")
	for i := range 12 {
		res := e.cell(o, script)
		require.NotNil(t, res.Details.ExitCode, "cell %d: %s", i, res.Text())
		assert.Equal(t, 7, *res.Details.ExitCode)
		assert.Contains(t, res.Text(), "before exit\nraw stderr\n", "cell %d", i)
	}
}

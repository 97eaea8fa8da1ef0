package proc

import (
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// openFDs is python printing the descriptors it holds, in order.
const openFDs = `import os
fds = []
for name in os.listdir("/proc/self/fd"):
    try:
        os.fstat(int(name))
        fds.append(int(name))
    except OSError:
        pass  # the listing's own descriptor, closed by now
print(sorted(fds))
`

// A descriptor the host holds without close-on-exec (inherited from a
// shell, a service manager or a job runner, or opened carelessly) never
// reaches python: it gets exactly 0, 1, 2 and its extra files.
func TestPythonGetsOnlyTheDescriptorsItIsGiven(t *testing.T) {
	sp := newSpawner(t)
	var stray [2]int
	require.NoError(t, syscall.Pipe(stray[:])) // no O_CLOEXEC
	defer syscall.Close(stray[0])
	defer syscall.Close(stray[1])

	out, st := runPython(t, sp, Limits{}, openFDs)
	require.Equal(t, 0, st.Code, out)
	assert.Equal(t, "[0, 1, 2]\n", out)

	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	out, st = runPython(t, sp, Limits{MemoryMB: 256}, openFDs, func(c *Command) { c.ExtraFiles = []*os.File{w, nil, w} })
	require.NoError(t, w.Close())
	require.Equal(t, 0, st.Code, out)
	assert.Equal(t, "[0, 1, 2, 3, 5]\n", out, "a nil extra file is a closed descriptor")
}

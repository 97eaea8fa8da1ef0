package kernelworker

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A cell that runs into the memory or file size limit raises in python
// (MemoryError, OSError EFBIG) and keeps its kernel, but its result still
// names the limit, as a per-call run's does.
func TestCellHittingALimitNamesItAndKeepsTheKernel(t *testing.T) {
	h := newKernelHarness(t, func(o *Options) { o.Limits = Limits{MemoryMB: 256, FsizeMB: 1} })
	pid := h.start()
	require.Equal(t, "", h.run(pid, "kept = 'yes'").Reason)

	res := h.run(pid, "x = bytearray(1 << 30)")
	require.Equal(t, ReasonException, res.Reason, "%+v", res)
	assert.Equal(t, "MemoryError", res.Exception.Name)
	assert.Equal(t, KilledByMemoryLimit, res.KilledBy)
	assert.True(t, res.StateRetained)

	res = h.run(pid, "open('big.bin', 'wb').write(b'x' * (2 << 20))")
	require.Equal(t, ReasonException, res.Reason, "%+v", res)
	assert.Equal(t, "OSError", res.Exception.Name)
	assert.Equal(t, KilledByFsizeLimit, res.KilledBy)

	res = h.run(pid, "raise OSError(2, 'not a limit')")
	assert.Equal(t, "", res.KilledBy)
	assert.Equal(t, "yes\n", h.run(pid, "print(kept)").Output.Text)
}

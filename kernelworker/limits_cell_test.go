package kernelworker

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/internal/proc"
)

// A cell that runs into the memory or file size limit raises in python
// (MemoryError, OSError EFBIG) and keeps its kernel, but its result still
// names the limit, as a per-call run's does.
func TestCellHittingALimitNamesItAndKeepsTheKernel(t *testing.T) {
	h := newKernelHarness(t, func(o *Options) { o.Limits = proc.Limits{MemoryMB: 256, FsizeMB: 1} })
	pid := h.start()
	require.Equal(t, "", h.run(pid, "kept = 'yes'").Reason)

	res := h.run(pid, "x = bytearray(1 << 30)")
	require.Equal(t, ReasonException, res.Reason, "%+v", res)
	assert.Equal(t, "MemoryError", res.Exception.Name)
	assert.Equal(t, proc.KilledByMemoryLimit, res.KilledBy)
	assert.True(t, res.StateRetained)

	res = h.run(pid, "open('big.bin', 'wb').write(b'x' * (2 << 20))")
	require.Equal(t, ReasonException, res.Reason, "%+v", res)
	assert.Equal(t, "OSError", res.Exception.Name)
	assert.Equal(t, proc.KilledByFsizeLimit, res.KilledBy)

	res = h.run(pid, "raise OSError(2, 'not a limit')")
	assert.Equal(t, "", res.KilledBy)
	assert.Equal(t, "yes\n", h.run(pid, "print(kept)").Output.Text)
}

func TestCellKilledByNamesTheLimitBehindAnException(t *testing.T) {
	all := proc.Limits{MemoryMB: 512, FsizeMB: 50}
	tests := []struct {
		name string
		exc  *Exception
		lim  proc.Limits
		want string
	}{
		{"no exception", nil, all, ""},
		{"MemoryError under AS limit", &Exception{Kind: "error", Name: "MemoryError"}, all, proc.KilledByMemoryLimit},
		{"MemoryError without limit", &Exception{Kind: "error", Name: "MemoryError"}, proc.Limits{}, ""},
		{"EFBIG under fsize limit", &Exception{Kind: "error", Name: "OSError", Message: "[Errno 27] File too large"}, all, proc.KilledByFsizeLimit},
		{"EFBIG without limit", &Exception{Kind: "error", Name: "OSError", Message: "[Errno 27] File too large"}, proc.Limits{}, ""},
		{"other errno", &Exception{Kind: "error", Name: "OSError", Message: "[Errno 2] No such file or directory: 'x'"}, all, ""},
		{"errno-like text of another error", &Exception{Kind: "error", Name: "ValueError", Message: "[Errno 27] made up"}, all, ""},
		{"malformed errno", &Exception{Kind: "error", Name: "OSError", Message: "[Errno x] odd"}, all, ""},
		{"SystemExit", &Exception{Kind: "system_exit", Name: "SystemExit", Message: "SystemExit: 1"}, all, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, cellKilledBy(tc.exc, tc.lim))
		})
	}
}

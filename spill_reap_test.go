package executecode_test

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/config"
)

// A host that lives past a spill's day reaps it when it spills again: the
// reaper's window comes round once per day of the host's life, not only
// when the spill root opens.
func TestALongLivedHostReapsExpiredSpillsAsItSpillsAgain(t *testing.T) {
	var skew atomic.Int64
	r := newRig(t,
		withCfg(func(c *config.Config) { c.KernelMode = config.PerCall; c.MaxOutputBytes = 1000 }),
		beforeUse(func(rt *executecode.Runtime) {
			executecode.SetClock(rt, func() time.Time { return time.Now().Add(time.Duration(skew.Load())) })
		}))
	flood := "for i in range(2000):\n    print('line', i)\n"
	first := r.run(nil, flood)
	spillDir := filepath.Dir(first.Details.FullOutputPath)
	require.NotEmpty(t, first.Details.FullOutputPath, first.Text())
	planted := filepath.Join(spillDir, "spill-planted0001")
	require.NoError(t, os.WriteFile(planted, []byte("old"), 0o600))
	old := time.Now().Add(-48 * time.Hour)
	require.NoError(t, os.Chtimes(planted, old, old))

	second := r.run(nil, flood)
	assert.FileExists(t, planted, "within the day of the first window nothing is reaped")
	assert.FileExists(t, first.Details.FullOutputPath)

	skew.Store(int64(25 * time.Hour))
	third := r.run(nil, flood)
	assert.NoFileExists(t, planted, "a day later the expired spill is reaped")
	assert.NoFileExists(t, first.Details.FullOutputPath, "so is the first run's, a day old by then")
	assert.NoFileExists(t, second.Details.FullOutputPath)
	assert.FileExists(t, third.Details.FullOutputPath, "the new spill is kept")
}

package executecode_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/config"
)

// A sandbox that is configured but not applied would let scripts run
// unconfined while the operator believes them confined: New refuses it.
func TestNewRefusesASandboxItCannotApply(t *testing.T) {
	cfg := config.Defaults()
	cfg.Enabled = true
	cfg.Sandbox = config.SandboxLandlock
	rt, err := executecode.New(cfg, executecode.WithRoot(t.TempDir()))
	require.Error(t, err)
	assert.Nil(t, rt)
	assert.True(t, errors.Is(err, executecode.ErrConfig), "%v", err)
	assert.Contains(t, err.Error(), `sandbox = "landlock"`)
}

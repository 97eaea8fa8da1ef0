package executecode_test

import (
	"encoding/json"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/config"
)

// The tool's description and parameters, shown to the model as they are,
// name no system this one was ported from. The run's own output is
// scanned in cmd/execute-code.
func TestDescriptionNamesNoVendor(t *testing.T) {
	vendor := regexp.MustCompile(`(?i)lemon|pi-python-repl`)
	for _, mode := range []config.Mode{config.PerCall, config.Session} {
		cfg := config.Defaults()
		cfg.KernelMode = mode
		assert.Empty(t, vendor.FindAllString(executecode.Description(cfg), -1), "%s: %s", mode, executecode.Description(cfg))
	}
	params, err := json.Marshal(executecode.Parameters())
	assert.NoError(t, err)
	assert.Empty(t, vendor.FindAllString(string(params), -1), "%s", params)
}

package executecode_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/config"
	"github.com/executecode/executecode/tools"
)

// The model is shown a signature for every helper the configuration
// enables, in the configured order: a helper added to the allowlist must
// not appear as an empty entry in the description.
func TestDescriptionShowsASignatureForEveryEnabledHelper(t *testing.T) {
	cfg := config.Defaults()
	cfg.Tools = append([]string(nil), tools.Allowlist...)
	d := executecode.Description(cfg)
	const lead = "return their text output as a string: "
	i := strings.Index(d, lead)
	if !assert.GreaterOrEqual(t, i, 0, d) {
		return
	}
	list := d[i+len(lead):]
	list = list[:strings.Index(list, ". Failed calls raise ToolError.")]
	at := 0
	for _, name := range tools.Allowlist {
		j := strings.Index(list[at:], name+"(")
		if assert.GreaterOrEqual(t, j, 0, "signature of %s in %q", name, list) {
			at += j + len(name)
		}
	}
	assert.NotContains(t, list, ", ,")
	assert.False(t, strings.HasPrefix(list, ", ") || strings.HasSuffix(list, ", "), list)
}

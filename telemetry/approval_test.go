package telemetry

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/executecode/executecode/tools"
)

// An approval event names every helper of the allowlist by its own name,
// and nothing else: a helper added to the allowlist must not read as
// "other" in events and metrics.
func TestApprovalEventsNameEveryAllowlistedToolAndNothingElse(t *testing.T) {
	var listed []string
	for _, tool := range ApprovalTools {
		listed = append(listed, string(tool))
	}
	assert.Equal(t, append(append([]string(nil), tools.Allowlist...), string(ApprovalToolOther)), listed)
	for _, name := range tools.Allowlist {
		assert.Equal(t, name, ApprovalToolFor(name).String())
	}
	for _, name := range []string{"bash", "Read", "", "read ", "other"} {
		assert.Equal(t, ApprovalToolOther, ApprovalToolFor(name), name)
	}
}

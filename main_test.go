package executecode_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/executecode/executecode/internal/mcptest"
)

func TestMain(m *testing.M) {
	// The test binary is also the MCP test server the MCP tests start.
	mcptest.MaybeServe()
	goleak.VerifyTestMain(m)
}

package mcpsource

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/executecode/executecode/internal/mcptest"
)

func TestMain(m *testing.M) {
	mcptest.MaybeServe()
	goleak.VerifyTestMain(m)
}

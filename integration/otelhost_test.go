package integration

import (
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An embedder on the current OpenTelemetry builds next to the runtime, and
// both work in one process. testdata/otelhost requires the current API
// and SDK modules. Without its SDK requirement it has the shape of a
// framework such as langchaingo, which requires only the API modules: the
// SDK then comes at whatever version the runtime's own graph holds, and
// protoactor-go alone would pin v1.21, whose meter lacks methods of the
// current API, so the runtime's go.mod must require a current SDK.
func TestAnEmbedderOnCurrentOpenTelemetryBuildsAndRuns(t *testing.T) {
	for name, edits := range map[string][]string{
		"API and SDK required": nil,
		"API only required":    {"-droprequire", "go.opentelemetry.io/otel/sdk/metric"},
	} {
		t.Run(name, func(t *testing.T) {
			bin := buildTestModule(t, "otelhost", edits...)
			cmd := exec.Command(bin)
			cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
			cmd.Dir = t.TempDir()
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			assert.Equal(t, "otel counter 1, live kernels max 16\n", string(out))
		})
	}
}

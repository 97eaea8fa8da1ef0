// Package shimtest runs a script with the rendered helper module in a
// real python3, wired to a bridge directory, a token and doorbells as a
// per-call run's interpreter is, for the tests and benchmarks of the
// packages that serve that bridge. The caller serves it (a pump server or
// run of its own), so this package imports no server.
//
// It is imported by test files and never by the runtime. Like every
// package but executecode, config, tools, telemetry and
// approval.Approver, it is the runtime's own machinery, with no
// compatibility promise.
package shimtest

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/internal/bell"
	"github.com/executecode/executecode/shimpy"
)

// Cell is a script staged in Work: its bridge directory Dir and its
// doorbells, which the test's cleanup closes.
type Cell struct {
	Work, Dir string
	Bells     *bell.Pair
	token     string
}

// Stage writes into work what a run's interpreter is given: the helper
// module for helpers and script.py, the script rendered; it makes the
// bridge directory and the doorbells. token is the bridge's.
func Stage(tb testing.TB, work, token, script string, helpers []string) *Cell {
	tb.Helper()
	c := &Cell{Work: work, Dir: filepath.Join(work, "rpc"), token: token}
	require.NoError(tb, os.Mkdir(c.Dir, 0o700))
	bells, err := bell.New()
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = bells.Close() })
	c.Bells = bells
	module := shimpy.RenderPrelude(shimpy.RenderModule(helpers, 0), 5)
	require.NoError(tb, os.WriteFile(filepath.Join(work, shimpy.ModuleName+".py"), []byte(module), 0o600))
	require.NoError(tb, os.WriteFile(filepath.Join(work, "script.py"), []byte(shimpy.RenderScript(script, helpers)), 0o600))
	return c
}

// Start starts python on the staged script, its output to out, with the
// doorbells on fds 3 and 4 and the run's configuration on its token
// socket, and closes this process's ends of both. ctx kills python.
func (c *Cell) Start(ctx context.Context, tb testing.TB, python string, stdout, stderr io.Writer) *exec.Cmd {
	tb.Helper()
	tok, err := shimpy.RunSocket(shimpy.RunConfig{Token: c.token, Dir: c.Dir, Bells: &shimpy.Bells{Request: 3, Response: 4}})
	require.NoError(tb, err)
	defer tok.Close()
	cmd := exec.CommandContext(ctx, python, "-B", "-E", "-s", "script.py")
	cmd.Dir = c.Work
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.ExtraFiles = append(c.Bells.ChildFiles(), tok)
	cmd.WaitDelay = time.Second
	require.NoError(tb, cmd.Start())
	require.NoError(tb, c.Bells.CloseChildEnds())
	return cmd
}

package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/approval"
	"github.com/executecode/executecode/config"
	"github.com/executecode/executecode/internal/proctest"
)

// The real MCP servers the tests drive, installed by `make peers`.
func filesystemServer(t testing.TB) string {
	return proctest.NPMBin(t, "@modelcontextprotocol/server-filesystem", "mcp-server-filesystem")
}

func everythingServer(t testing.TB) string {
	return proctest.NPMBin(t, "@modelcontextprotocol/server-everything", "mcp-server-everything")
}

var bothModes = []config.Mode{config.PerCall, config.Session}

// mcpEnv is a runtime in mode with the filesystem server over its tool
// root as "fs" and the everything server as "everything", and the owner
// its calls run under (nil per call). Both servers carry the test's mark,
// so newEnv's check finds them if they outlive Close.
func mcpEnv(t *testing.T, mode config.Mode, files map[string]string, opts ...envOption) (*env, *executecode.Owner) {
	t.Helper()
	// The filesystem server's directory is the tool root too, resolved:
	// the server refuses a path through a symlink out of it.
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	for name, body := range files {
		require.NoError(t, os.WriteFile(filepath.Join(root, name), []byte(body), 0o644))
	}
	opts = append([]envOption{
		withConfig(func(c *config.Config) { c.KernelMode = mode }),
		withRuntimeOption(executecode.WithMCPServer("fs", filesystemServer(t), root)),
		withRuntimeOption(executecode.WithMCPServer("everything", everythingServer(t))),
	}, opts...)
	e := newEnv(t, nil, append(opts, withRuntimeOption(executecode.WithRoot(root)))...)
	e.root = root
	var o *executecode.Owner
	if mode == config.Session {
		o = e.attach("mcp")
	}
	return e, o
}

func (e *env) call(o *executecode.Owner, script string, timeoutMS ...int) executecode.Result {
	e.t.Helper()
	call := executecode.Call{Script: script, Owner: o}
	if len(timeoutMS) > 0 {
		call.TimeoutMS = timeoutMS[0]
	}
	res, err := e.rt.Execute(context.Background(), call)
	require.NoError(e.t, err)
	return res
}

// summary lists the root and reads every file through the filesystem
// server in one batch(), and says what it found with text().
const summary = `listing = fs_list_directory(path=ROOT)["content"]
names = sorted(l.split("] ", 1)[1] for l in listing.splitlines() if l.startswith("[FILE] "))
files = batch([("fs_read_text_file", {"path": ROOT + "/" + n}) for n in names])
text("%d files, %d lines: " % (len(names), sum(f["content"].count("\n") for f in files))
     + "; ".join("%s starts %r" % (n, f["content"].split("\n")[0]) for n, f in zip(names, files)))
`

func TestAScriptSummarisesFilesReadThroughTheFilesystemServerInOneBatch(t *testing.T) {
	for _, mode := range bothModes {
		t.Run(string(mode), func(t *testing.T) {
			e, o := mcpEnv(t, mode, map[string]string{"a.md": "# A\nbody\n", "b.txt": "bee\n", "c.py": "print(1)\nprint(2)\nprint(3)\n"})
			res := e.call(o, fmt.Sprintf("ROOT = %q\n", e.root)+summary)
			assert.Equal(t, []string{`3 files, 6 lines: a.md starts '# A'; b.txt starts 'bee'; c.py starts 'print(1)'`}, res.Blocks, res.Text())
			assert.Equal(t, executecode.Untrusted, res.Trust, "an MCP server's results are untrusted unless marked")
			assert.Equal(t, 4, res.Details.RPCCalls)
			assert.Equal(t, []string{"fs_list_directory", "fs_read_text_file"}, res.Details.RPCTools)
			assert.Contains(t, res.Text(), "<<<EXTERNAL_UNTRUSTED_CONTENT>>>")
		})
	}
}

func TestTheEverythingServersToolsAreCalledWithTheirSchemas(t *testing.T) {
	for _, mode := range bothModes {
		t.Run(string(mode), func(t *testing.T) {
			e, o := mcpEnv(t, mode, nil)
			res := e.call(o, `text(everything_echo(message="hi"))
text(everything_echo("positional"))
text(everything_get_sum(a=2, b=40))
s = everything_get_structured_content(location="Chicago")
text(type(s).__name__ + " " + ",".join(sorted(s)))
text(everything_trigger_long_running_operation(duration=0.2, steps=2))
text(everything_get_tiny_image())
try:
    everything_get_sum(a=1)
except TypeError as e:
    text("TypeError: " + str(e))
try:
    everything_get_sum(a="x", b=[1])
except ToolError as e:
    text("ToolError")`, 20000)
			require.Len(t, res.Blocks, 8, res.Text())
			assert.Equal(t, "Echo: hi", res.Blocks[0])
			assert.Equal(t, "Echo: positional", res.Blocks[1])
			assert.Equal(t, "The sum of 2 and 40 is 42.", res.Blocks[2])
			assert.Equal(t, "dict conditions,humidity,temperature", res.Blocks[3], "structured content arrives as a dict")
			assert.Contains(t, res.Blocks[4], "Long running operation completed")
			assert.Contains(t, res.Blocks[5], "[image omitted: image/png")
			assert.Equal(t, "TypeError: everything_get_sum() missing 1 required positional argument: 'b'", res.Blocks[6])
			assert.Equal(t, "ToolError", res.Blocks[7], "the server validates what the stub passes through")
		})
	}
}

// A real server that takes longer than the run has gives the script a
// ToolError before the deadline: the script still answers.
func TestALongRunningToolEndsInAToolErrorBeforeTheDeadline(t *testing.T) {
	for _, mode := range bothModes {
		t.Run(string(mode), func(t *testing.T) {
			e, o := mcpEnv(t, mode, nil)
			res := e.call(o, `try:
    everything_trigger_long_running_operation(duration=60, steps=2)
except ToolError as e:
    text("gave up: " + str(e))`, 2000)
			require.Len(t, res.Blocks, 1, res.Text())
			assert.Contains(t, res.Blocks[0], "gave up: everything_trigger_long_running_operation: the MCP server did not answer in time")
			assert.Empty(t, res.Details.KilledBy)
			assert.Equal(t, []string{"Echo: still"}, e.call(o, `text(everything_echo(message="still"))`).Blocks)
		})
	}
}

func TestTheDescriptionShowsMCPToolsWithTheirSignatures(t *testing.T) {
	e, _ := mcpEnv(t, config.PerCall, nil)
	d := e.rt.Description()
	for _, sig := range []string{
		"fs_read_text_file(path, head=None, tail=None)",
		"fs_edit_file(path, edits, dryRun=None)",
		"fs_list_allowed_directories()",
		"everything_echo(message)",
		"everything_get_sum(a, b)",
		"everything_trigger_long_running_operation(duration=None, steps=None)",
		"everything_get_sum: Returns the sum of two numbers.",
	} {
		assert.Contains(t, d, sig)
	}
	assert.NotContains(t, d, "\n")
}

func TestPolicyDenyAndApprovalApplyToMCPTools(t *testing.T) {
	for _, mode := range bothModes {
		t.Run(string(mode), func(t *testing.T) {
			var mu sync.Mutex
			var asked []string
			approver := approval.ApproverFunc(func(_ context.Context, req approval.Request) (approval.Decision, error) {
				mu.Lock()
				defer mu.Unlock()
				asked = append(asked, req.Tool+" "+filepath.Base(fmt.Sprint(req.Args["path"])))
				if strings.HasSuffix(fmt.Sprint(req.Args["path"]), "ok.txt") {
					return approval.ApproveOnce, nil
				}
				return approval.Deny, nil
			})
			e, o := mcpEnv(t, mode, map[string]string{"ok.txt": "fine\n", "secret.txt": "no\n"},
				withConfig(func(c *config.Config) {
					c.Deny = []string{"fs_write_file"}
					c.RequireApproval = []string{"fs_read_text_file"}
				}),
				withRuntimeOption(executecode.WithApprover(approver)))
			res := e.call(o, fmt.Sprintf(`ROOT = %q
try:
    fs_write_file(path=ROOT + "/new.txt", content="x")
except ToolError as e:
    text(str(e))
text(fs_read_text_file(path=ROOT + "/ok.txt")["content"])
try:
    fs_read_text_file(path=ROOT + "/secret.txt")
except ToolError as e:
    text("refused")`, e.root))
			assert.Equal(t, []string{"Tool 'fs_write_file' is in deny list", "fine\n", "refused"}, res.Blocks, res.Text())
			_, err := os.Stat(filepath.Join(e.root, "new.txt"))
			assert.True(t, os.IsNotExist(err), "a denied call never reaches the server")
			mu.Lock()
			assert.Equal(t, []string{"fs_read_text_file ok.txt", "fs_read_text_file secret.txt"}, asked)
			mu.Unlock()
			assert.Equal(t, 2, res.Details.RPCDenied)
		})
	}
}

func TestAServerMarkedTrustedKeepsTheResultTrusted(t *testing.T) {
	e := newEnv(t, nil, withRuntimeOption(executecode.WithMCP(executecode.MCPServer{
		Name: "everything", Command: everythingServer(t), Trusted: true})))
	res := e.call(nil, `text(everything_echo(message="ours"))`)
	assert.Equal(t, []string{"Echo: ours"}, res.Blocks)
	assert.Equal(t, executecode.Trusted, res.Trust)
}

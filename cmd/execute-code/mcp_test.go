package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/internal/proctest"
)

// mcpClient is the SDK's own client connected to `execute-code mcp`, a
// real process with a TMPDIR of its own that nothing may outlive.
type mcpClient struct {
	cs   *mcp.ClientSession
	cmd  *exec.Cmd
	tmp  string
	mu   sync.Mutex
	logs []string
	prog []string
}

func connectMCP(t testing.TB, opts *mcp.ClientOptions, args ...string) *mcpClient {
	t.Helper()
	c := &mcpClient{tmp: t.TempDir()}
	if opts == nil {
		opts = &mcp.ClientOptions{}
	}
	opts.LoggingMessageHandler = func(_ context.Context, r *mcp.LoggingMessageRequest) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.logs = append(c.logs, r.Params.Data.(string))
	}
	opts.ProgressNotificationHandler = func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.prog = append(c.prog, r.Params.Message)
	}
	c.cmd = exec.Command(binary, append([]string{"mcp", "--root", c.tmp}, args...)...)
	c.cmd.Env = append(os.Environ(), "TMPDIR="+c.tmp)
	c.cmd.Dir = c.tmp
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: c.cmd}, nil)
	require.NoError(t, err)
	c.cs = cs
	t.Cleanup(func() { c.close(t) })
	return c
}

// close ends the connection; the server must then exit on its own, with
// no interpreter left that inherited its TMPDIR, and no file in it.
func (c *mcpClient) close(t testing.TB) {
	if c.cs == nil {
		return
	}
	_ = c.cs.Close()
	c.cs = nil
	assert.True(t, c.cmd.ProcessState != nil && c.cmd.ProcessState.Exited(), "mcp exits when its client closes the connection")
	assert.Empty(t, proctest.WaitGone(proctest.Marked("TMPDIR", c.tmp), 5*time.Second), "no process outlives the mcp command")
	left, _ := os.ReadDir(c.tmp)
	var names []string
	for _, e := range left {
		names = append(names, e.Name())
	}
	assert.Empty(t, names, "nothing is left in the command's TMPDIR")
}

func (c *mcpClient) call(t testing.TB, ctx context.Context, args map[string]any, progress any) *mcp.CallToolResult {
	t.Helper()
	p := &mcp.CallToolParams{Name: "execute_code", Arguments: args}
	if progress != nil {
		p.SetProgressToken(progress)
	}
	res, err := c.cs.CallTool(ctx, p)
	require.NoError(t, err)
	return res
}

func mcpText(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func structured(t testing.TB, r *mcp.CallToolResult) (blocks []string, details map[string]any, trust string) {
	t.Helper()
	b, err := json.Marshal(r.StructuredContent)
	require.NoError(t, err)
	var s struct {
		Blocks  []string       `json:"blocks"`
		Details map[string]any `json:"details"`
		Trust   string         `json:"trust"`
	}
	require.NoError(t, json.Unmarshal(b, &s), string(b))
	return s.Blocks, s.Details, s.Trust
}

func TestMCPSessionStateLastsForOneConnectionOnly(t *testing.T) {
	ctx := context.Background()
	first := connectMCP(t, nil)
	r := first.call(t, ctx, map[string]any{"script": "x = 41"}, nil)
	require.False(t, r.IsError, mcpText(r))
	r = first.call(t, ctx, map[string]any{"script": "text(str(x + 1))"}, nil)
	require.False(t, r.IsError, mcpText(r))
	blocks, details, trust := structured(t, r)
	assert.Equal(t, []string{"42"}, blocks)
	assert.Equal(t, true, details["kernel_reused"])
	assert.Equal(t, "trusted", trust)

	r = first.call(t, ctx, map[string]any{"script": "text(str(globals().get('x')))", "reset": true}, nil)
	blocks, details, _ = structured(t, r)
	assert.Equal(t, []string{"None"}, blocks, "reset discards the connection's state")
	assert.Equal(t, true, details["reset_performed"])

	second := connectMCP(t, nil)
	second.call(t, ctx, map[string]any{"script": "x = 1"}, nil)
	r = first.call(t, ctx, map[string]any{"script": "x = 7"}, nil)
	require.False(t, r.IsError, mcpText(r))
	r = second.call(t, ctx, map[string]any{"script": "text(str(x))"}, nil)
	blocks, _, _ = structured(t, r)
	assert.Equal(t, []string{"1"}, blocks, "each connection is its own session")
}

func TestMCPPerCallRunsEachCallFresh(t *testing.T) {
	ctx := context.Background()
	c := connectMCP(t, nil, "--mode", "per_call")
	c.call(t, ctx, map[string]any{"script": "x = 1"}, nil)
	r := c.call(t, ctx, map[string]any{"script": "text(str(globals().get('x')))"}, nil)
	blocks, details, _ := structured(t, r)
	assert.Equal(t, []string{"None"}, blocks)
	assert.Equal(t, false, details["persistent"])
}

func TestMCPFailedRunsAndBadArgumentsAreToolErrors(t *testing.T) {
	ctx := context.Background()
	c := connectMCP(t, nil)
	r := c.call(t, ctx, map[string]any{"script": "raise ValueError('boom')"}, nil)
	assert.True(t, r.IsError)
	assert.Contains(t, mcpText(r), "ValueError: boom")

	r = c.call(t, ctx, map[string]any{"script": "text('ok')"}, nil)
	assert.False(t, r.IsError, mcpText(r))

	// The SDK holds arguments to the schema before the tool sees them;
	// either way the client gets an error naming the problem, and the
	// server goes on serving.
	for _, args := range []map[string]any{{}, {"script": 5}, {"script": "text(1)", "reset": "yes"}} {
		res, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_code", Arguments: args})
		if err == nil {
			assert.True(t, res.IsError, "%v: %s", args, mcpText(res))
			assert.NotEmpty(t, mcpText(res), "%v", args)
		} else {
			assert.Regexp(t, `script|reset|argument|invalid`, err.Error(), "%v", args)
		}
	}
	_, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: "no_such_tool", Arguments: map[string]any{}})
	assert.Error(t, err)

	r = c.call(t, ctx, map[string]any{"script": "text('still serving')"}, nil)
	blocks, _, _ := structured(t, r)
	assert.Equal(t, []string{"still serving"}, blocks)
}

func TestMCPNotifyIsProgressWithATokenAndALogWithout(t *testing.T) {
	ctx := context.Background()
	c := connectMCP(t, nil)
	script := "notify('one')\nnotify('two')\ntext('done')"
	r := c.call(t, ctx, map[string]any{"script": script}, "tok-1")
	require.False(t, r.IsError, mcpText(r))
	// The client asks for log messages per request (older protocol
	// versions set the level once, with logging/setLevel).
	r, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_code", Arguments: map[string]any{"script": script},
		Meta: mcp.Meta{mcp.MetaKeyLogLevel: "info"}})
	require.NoError(t, err)
	require.False(t, r.IsError, mcpText(r))
	// Notifications may trail the result a little.
	assert.Eventually(t, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.prog) == 2 && len(c.logs) == 2
	}, 5*time.Second, 10*time.Millisecond)
	c.mu.Lock()
	defer c.mu.Unlock()
	assert.Equal(t, []string{"one", "two"}, c.prog, "progress on the request's token")
	assert.Equal(t, []string{"one", "two"}, c.logs, "log messages for a request without a token")
}

func TestMCPCancellationEndsTheRunAndItsInterpreter(t *testing.T) {
	for _, mode := range []string{"per_call", "session"} {
		t.Run(mode, func(t *testing.T) {
			c := connectMCP(t, nil, "--mode", mode)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			pid := make(chan int, 1)
			done := make(chan error, 1)
			go func() {
				_, err := c.cs.CallTool(ctx, withToken(&mcp.CallToolParams{Name: "execute_code",
					Arguments: map[string]any{"script": "import os, time\nnotify(str(os.getpid()))\ntime.sleep(60)"}}, "t"))
				done <- err
			}()
			require.Eventually(t, func() bool {
				c.mu.Lock()
				defer c.mu.Unlock()
				if len(c.prog) == 0 {
					return false
				}
				n, err := strconv.Atoi(c.prog[0])
				require.NoError(t, err)
				pid <- n
				return true
			}, 20*time.Second, 10*time.Millisecond)
			p := <-pid
			cancel()
			require.ErrorIs(t, <-done, context.Canceled)
			assert.Empty(t, proctest.WaitGone([]int{p}, 10*time.Second), "the cancelled run's interpreter is gone")
			r := c.call(t, context.Background(), map[string]any{"script": "text('after')"}, nil)
			blocks, _, _ := structured(t, r)
			assert.Equal(t, []string{"after"}, blocks, "the connection serves on after a cancel")
		})
	}
}

func withToken(p *mcp.CallToolParams, token any) *mcp.CallToolParams {
	p.SetProgressToken(token)
	return p
}

func TestMCPApprovalsUseElicitationWhenTheClientHasIt(t *testing.T) {
	ctx := context.Background()
	cfg := writeFile(t, t.TempDir(), "c.toml", `require_approval = ["ls"]`)
	var mu sync.Mutex
	answer, asked := "approve_once", []string{}
	opts := &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, r.Params.Message)
		if answer == "decline" {
			return &mcp.ElicitResult{Action: "decline"}, nil
		}
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": answer}}, nil
	}}
	c := connectMCP(t, opts, "--config", cfg)
	r := c.call(t, ctx, map[string]any{"script": "text(ls('.'))"}, nil)
	assert.False(t, r.IsError, mcpText(r))
	_, details, _ := structured(t, r)
	assert.Equal(t, 0.0, details["rpc_denied"])
	mu.Lock()
	require.Len(t, asked, 1)
	assert.Contains(t, asked[0], "ls")
	answer = "decline"
	mu.Unlock()
	r = c.call(t, ctx, map[string]any{"script": "text(ls('.'))"}, nil)
	_, details, _ = structured(t, r)
	assert.Equal(t, 1.0, details["rpc_denied"], mcpText(r))

	// Without elicitation and without a terminal, --approve defaults to deny.
	plain := connectMCP(t, nil, "--config", cfg)
	r = plain.call(t, ctx, map[string]any{"script": "text(ls('.'))"}, nil)
	_, details, _ = structured(t, r)
	assert.Equal(t, 1.0, details["rpc_denied"], mcpText(r))
	allow := connectMCP(t, nil, "--config", cfg, "--approve", "allow")
	r = allow.call(t, ctx, map[string]any{"script": "text(ls('.'))"}, nil)
	_, details, _ = structured(t, r)
	assert.Equal(t, 0.0, details["rpc_denied"], mcpText(r))
}

// TestMCPAnswersMalformedInputAndKeepsServing writes raw lines, as a
// broken client would: each gets the SDK's JSON-RPC error, and a valid
// call afterwards still runs.
func TestMCPAnswersMalformedInputAndKeepsServing(t *testing.T) {
	tmp := t.TempDir()
	cmd := exec.Command(binary, "mcp", "--root", tmp)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	lines := bufio.NewScanner(stdout)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	send := func(s string) { _, err := io.WriteString(stdin, s+"\n"); require.NoError(t, err) }
	next := func() map[string]any {
		require.True(t, lines.Scan(), "the server answers")
		var m map[string]any
		require.NoError(t, json.Unmarshal(lines.Bytes(), &m), lines.Text())
		return m
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	assert.Contains(t, next(), "result")
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"no/such/method"}`)
	m := next()
	assert.Contains(t, m, "error", m)
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"execute_code","arguments":"not an object"}}`)
	m = next()
	assert.True(t, m["error"] != nil || m["result"].(map[string]any)["isError"] == true, m)
	send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"execute_code","arguments":{"script":"text('alive')"}}}`)
	m = next()
	require.Contains(t, m, "result", m)
	assert.Equal(t, 4.0, m["id"])
	assert.Contains(t, m["result"].(map[string]any)["structuredContent"].(map[string]any)["blocks"], "alive")
	require.NoError(t, stdin.Close())
	require.NoError(t, cmd.Wait())
	assert.Empty(t, proctest.WaitGone(proctest.Marked("TMPDIR", tmp), 5*time.Second))
}

// TestMCPInspectorDrivesTheServer uses the MCP inspector's CLI, a client
// nobody here wrote, for tools/list and tools/call in both modes.
func TestMCPInspectorDrivesTheServer(t *testing.T) {
	inspector := proctest.NPMBin(t, "@modelcontextprotocol/inspector-cli", "mcp-inspector-cli")
	// The inspector finds its own package.json relative to the working
	// directory: run it from its build directory.
	real, err := filepath.EvalSymlinks(inspector)
	require.NoError(t, err)
	dir := filepath.Dir(real)
	inspect := func(t *testing.T, args ...string) map[string]any {
		t.Helper()
		tmp := t.TempDir()
		cmd := exec.Command("node", append([]string{real, "--cli", binary, "mcp", "--root", tmp}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
		out, err := cmd.Output()
		require.NoError(t, err, "%s", out)
		var m map[string]any
		require.NoError(t, json.Unmarshal(out[strings.IndexByte(string(out), '{'):], &m), "%s", out)
		assert.Empty(t, proctest.WaitGone(proctest.Marked("TMPDIR", tmp), 5*time.Second))
		return m
	}
	list := inspect(t, "--method", "tools/list")
	tools := list["tools"].([]any)
	require.Len(t, tools, 1)
	tool := tools[0].(map[string]any)
	assert.Equal(t, "execute_code", tool["name"])
	assert.Contains(t, tool["description"], "read(path")
	assert.Equal(t, []any{"script"}, tool["inputSchema"].(map[string]any)["required"])

	for _, mode := range []string{"per_call", "session"} {
		res := inspect(t, "--mode", mode, "--method", "tools/call", "--tool-name", "execute_code",
			"--tool-arg", "script=notify('working')\ntext(str(6 * 7))")
		assert.NotEqual(t, true, res["isError"], res)
		sc := res["structuredContent"].(map[string]any)
		assert.Equal(t, []any{"42"}, sc["blocks"], mode)
		assert.Equal(t, mode == "session", sc["details"].(map[string]any)["persistent"], mode)
		assert.Contains(t, res["content"].([]any)[0].(map[string]any)["text"], "42")
	}
}

package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/internal/proctest"
)

// fsFixture is a directory of three files and the --mcp value of the
// real filesystem server over it.
func fsFixture(t *testing.T) (dir, value string) {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	for i, body := range []string{"alpha", "beta", "gamma"} {
		writeFile(t, dir, fmt.Sprintf("f%d.txt", i+1), body+"\n")
	}
	bin := proctest.NPMBin(t, "@modelcontextprotocol/server-filesystem", "mcp-server-filesystem")
	return dir, "fs=" + bin + " '" + dir + "'"
}

// summaryScript lists dir and reads every file in one batch() through the
// filesystem server, and says what it found with text().
func summaryScript(dir string) string {
	return fmt.Sprintf(`d = %q
listing = fs_list_directory(path=d)["content"]
names = sorted(l.split("] ", 1)[1] for l in listing.splitlines() if l.startswith("[FILE] "))
files = batch([("fs_read_text_file", {"path": d + "/" + n}) for n in names])
text("%%d files: " %% len(names) + ", ".join("%%s=%%s" %% (n, f["content"].strip()) for n, f in zip(names, files)))
`, dir)
}

// noServerLeft fails when a process carrying mark (an MCP server and
// whatever it started) is still alive.
func noServerLeft(t *testing.T, mark string) {
	t.Helper()
	assert.Empty(t, proctest.WaitGone(proctest.Marked(markEnv, mark), 3*time.Second), "an MCP server outlived the command")
}

func TestRunCallsAnMCPServerGivenWithMCP(t *testing.T) {
	dir, fs := fsFixture(t)
	for _, mode := range []string{"per_call", "session"} {
		t.Run(mode, func(t *testing.T) {
			mark := newMark()
			r := cli(t, summaryScript(dir), []string{markEnv + "=" + mark}, "run", "--json", "--mode", mode, "--mcp", fs, "-")
			require.Equal(t, 0, r.code, r.stdout+r.stderr)
			var res struct {
				Trust   string
				Blocks  []string
				Details map[string]any
			}
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &res), r.stdout)
			assert.Equal(t, []string{"3 files: f1.txt=alpha, f2.txt=beta, f3.txt=gamma"}, res.Blocks)
			assert.Equal(t, "untrusted", res.Trust)
			assert.Equal(t, 4.0, res.Details["rpc_calls"])
			noServerLeft(t, mark)
		})
	}
}

func TestRunWithMCPTrustedKeepsTheResultTrusted(t *testing.T) {
	dir, fs := fsFixture(t)
	mark := newMark()
	r := cli(t, summaryScript(dir), []string{markEnv + "=" + mark}, "run", "--json", "--mcp-trusted", fs, "-")
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, `"trust":"trusted"`)
	noServerLeft(t, mark)
}

func TestServeTakesRepeatedMCPFlags(t *testing.T) {
	dir, fs := fsFixture(t)
	everything := "everything=" + proctest.NPMBin(t, "@modelcontextprotocol/server-everything", "mcp-server-everything")
	mark := newMark()
	p := startServeIn(t, t.TempDir(), []string{markEnv + "=" + mark}, "--mcp", fs, "--mcp", everything)
	p.send(`{"id":1,"op":"attach","session":"s1","agent":"main"}`)
	assert.Equal(t, map[string]any{"id": 1.0, "ok": true}, p.answer())
	script, err := json.Marshal(summaryScript(dir) + `text(everything_echo(message="hi"))` + "\n" + `text(str(everything_get_sum(a=2, b=3)))`)
	require.NoError(t, err)
	p.send(fmt.Sprintf(`{"id":2,"op":"execute","session":"s1","script":%s}`, script))
	a := p.answer()
	assert.Equal(t, []any{"3 files: f1.txt=alpha, f2.txt=beta, f3.txt=gamma", "Echo: hi", "The sum of 2 and 3 is 5."}, blocks(t, a), "%v", a)
	p.send(`{"id":3,"op":"execute","script":"text(str(len(everything_echo(message='x'))))"}`)
	assert.Equal(t, []any{"7"}, blocks(t, p.answer()), "a per-call run of serve reaches the same servers")
	require.NoError(t, p.in.Close())
	require.NoError(t, p.cmd.Wait())
	noServerLeft(t, mark)
}

func TestBadMCPValuesAreUsageErrorsNamingTheFlag(t *testing.T) {
	_, fs := fsFixture(t)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no name", []string{"--mcp", "mcp-server-filesystem"}, `--mcp: "mcp-server-filesystem" is not name=command`},
		{"bad name", []string{"--mcp", "1fs=true"}, `--mcp: the server name "1fs" must be`},
		{"keyword", []string{"--mcp-trusted", "class=true"}, `--mcp-trusted: the server name "class" must be`},
		{"no command", []string{"--mcp", "fs= "}, `--mcp: server "fs" has no command`},
		{"empty command", []string{"--mcp", "fs='' x"}, `--mcp: server "fs" has no command`},
		{"expansion", []string{"--mcp", "fs=cat $HOME"}, `--mcp: server "fs": "cat $HOME": expansions`},
		{"substitution", []string{"--mcp", "fs=cat $(id)"}, `expansions`},
		{"operator", []string{"--mcp", "fs=cat; rm x"}, `--mcp: server "fs": "cat; rm x"`},
		{"unclosed quote", []string{"--mcp", "fs=cat 'x"}, `--mcp: server "fs"`},
		{"twice", []string{"--mcp", fs, "--mcp", "fs=true"}, `--mcp: the server name "fs" is given twice`},
		{"no such command", []string{"--mcp", "fs=no-such-server-here"}, `"no-such-server-here"`},
		{"server fails", []string{"--mcp", "bad=sh -c 'exit 3'"}, `mcp server "bad": start`},
		{"tool it lacks", []string{"--mcp", fs, "--tools", "read,fs_nope"}, `--tools: "fs_nope" is not a tool of the MCP server "fs"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, cmd := range []string{"run", "serve"} {
				r := cli(t, "text('x')", nil, append([]string{cmd}, tc.args...)...)
				assert.Equal(t, 2, r.code, "%s: %s", cmd, r.stderr)
				assert.Contains(t, r.stderr, tc.want, cmd)
				assert.Equal(t, 1, strings.Count(strings.TrimSpace(r.stderr), "\n")+1, "one line: %q", r.stderr)
			}
		})
	}
}

// --tools may name an MCP tool, checked once the server has listed it;
// it narrows the built-ins only.
func TestToolsMayNameAnMCPTool(t *testing.T) {
	dir, fs := fsFixture(t)
	script := fmt.Sprintf("text(fs_read_text_file(path=%q)['content'])\ntry:\n    read('x')\nexcept NameError as e:\n    text(str(e))", filepath.Join(dir, "f1.txt"))
	for _, list := range []string{"ls,fs_read_text_file", "fs_read_text_file"} {
		r := cli(t, script, nil, "run", "--json", "--mcp", fs, "--tools", list, "-")
		require.Equal(t, 0, r.code, r.stderr)
		var res struct{ Blocks []string }
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &res), r.stdout)
		assert.Equal(t, []string{"alpha\n", "name 'read' is not defined"}, res.Blocks, list)
		assert.Empty(t, r.stderr)
	}
}

// A host killed with SIGKILL takes its MCP servers with it, and what they
// started: the server dies of the parent-death signal, its session (here
// a sleeping grandchild) through the guard.
func TestHostKilledLeavesNoMCPServerBehind(t *testing.T) {
	everything := proctest.NPMBin(t, "@modelcontextprotocol/server-everything", "mcp-server-everything")
	mark := newMark()
	t.Cleanup(func() {
		for _, pid := range proctest.Marked(markEnv, mark) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	p := startServeIn(t, t.TempDir(), []string{markEnv + "=" + mark}, "--mcp", "g=sh -c 'sleep 600 & exec "+everything+"'")
	p.send(`{"id":1,"op":"execute","script":"text(g_echo(message='up'))"}`)
	assert.Equal(t, []any{"Echo: up"}, blocks(t, p.answer()))
	before := proctest.Marked(markEnv, mark)
	require.GreaterOrEqual(t, len(before), 4, "serve, the server, its sleeping child and the guard")

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	_ = p.cmd.Wait()
	assert.Empty(t, proctest.WaitGone(before, 5*time.Second), "processes left after the host's SIGKILL")
}

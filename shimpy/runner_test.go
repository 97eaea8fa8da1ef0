package shimpy

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/internal/proctest"
)

const unsupportedInput = "input() is not supported: the persistent python kernel has " +
	"no interactive stdin; read from a file or call a helper function instead"

func TestRunnerIsEmbeddedAndSpeaksProtocolVersionOne(t *testing.T) {
	assert.Equal(t, "runner.py", RunnerName)
	assert.Equal(t, Runner(), Runner())
	assert.Contains(t, Runner(), "\nPROTOCOL_VERSION = "+strconv.Itoa(ProtocolVersion)+"\n")
	assert.Contains(t, Runner(), `FRAME_PREFIX = b"\x1elemon-python\t"`)
}

func TestRunnerAnswersInitWithItsPid(t *testing.T) {
	k := startKernel(t, kernelOptions{})
	ready := k.init(t)
	require.NotNil(t, ready.PID)
	assert.Equal(t, k.cmd.Process.Pid, *ready.PID)
}

func TestCellOutputStreamsBetweenStartedAndDone(t *testing.T) {
	k := startKernel(t, kernelOptions{})
	k.init(t)
	res := k.eval(t, "c1", "import sys\nprint('hello')\nprint('warning', file=sys.stderr)\n", nil)
	// fd 1 and fd 2 share one pipe: one stream, in written order.
	assert.Equal(t, "hello\nwarning\n", res.stdout)
	assert.Empty(t, res.stderr)
	assert.Empty(t, res.exceptions)
	assert.Equal(t, 0, *res.done.Dropped)
}

func TestStateSurvivesBetweenCells(t *testing.T) {
	k := startKernel(t, kernelOptions{})
	k.init(t)
	k.eval(t, "c1", "a = 41\nimport json\nimport os\nos.environ['LEMON_RUNNER_TEST'] = 'kept'\n", nil)
	res := k.eval(t, "c2", "print(a + 1, json.dumps([1]), os.environ['LEMON_RUNNER_TEST'])", nil)
	assert.Equal(t, "42 [1] kept\n", res.stdout)
}

func TestCellsRunAsMain(t *testing.T) {
	k := startKernel(t, kernelOptions{})
	k.init(t)
	k.eval(t, "c1", "def f():\n    return 7\n", nil)
	res := k.eval(t, "c2", "import __main__, pickle\nprint(__name__, __doc__, __main__.f(), pickle.loads(pickle.dumps(f))())", nil)
	assert.Equal(t, "__main__ None 7 7\n", res.stdout)
}

func TestExceptionFrames(t *testing.T) {
	k := startKernel(t, kernelOptions{})
	k.init(t)
	cases := []struct {
		name     string
		code     string
		kind     string
		exc      string
		message  string
		lastLine string
		shows    []string
	}{
		{"error", "x = 1\nraise ValueError('boom')", "error", "ValueError", "boom", "ValueError: boom",
			[]string{"Traceback (most recent call last):\n", `File "<cell>", line 2, in <module>`, "    raise ValueError('boom')"}},
		{"system exit without code", "import sys\nsys.exit()", "system_exit", "SystemExit", "SystemExit", "SystemExit", nil},
		{"system exit with int", "import sys\nsys.exit(3)", "system_exit", "SystemExit", "SystemExit: 3", "SystemExit: 3", nil},
		{"system exit with bool", "import sys\nsys.exit(True)", "system_exit", "SystemExit", "SystemExit: True", "SystemExit: True", nil},
		{"system exit with text", "import sys\nsys.exit('bye')", "system_exit", "SystemExit", "SystemExit: bye", "SystemExit: bye", nil},
		{"keyboard interrupt raised by the cell", "raise KeyboardInterrupt", "interrupted", "KeyboardInterrupt", "", "KeyboardInterrupt", nil},
		{"input", "input()", "unsupported_input", "UnsupportedInput", unsupportedInput, "UnsupportedInput: " + unsupportedInput,
			[]string{`File "<cell>", line 1, in <module>`, "    input()"}},
		{"input with prompt", "input('name? ')", "unsupported_input", "UnsupportedInput", "name? \n" + unsupportedInput, unsupportedInput, nil},
		{"stdin readline", "import sys\nsys.stdin.readline()", "unsupported_input", "UnsupportedInput", unsupportedInput, unsupportedInput, nil},
		{"stdin read", "import sys\nsys.__stdin__.read()", "unsupported_input", "UnsupportedInput", unsupportedInput, unsupportedInput, nil},
		{"stdin iteration", "import sys\nfor line in sys.stdin:\n    pass", "unsupported_input", "UnsupportedInput", unsupportedInput, unsupportedInput, nil},
		{"stdin fileno", "import sys\nsys.stdin.fileno()", "error", "UnsupportedOperation",
			"stdin is not available in the python kernel", "stdin is not available in the python kernel", nil},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := k.eval(t, fmt.Sprintf("cell-%d", i), tc.code, nil)
			exc := res.exception(t)
			assert.Equal(t, tc.kind, exc.Kind)
			assert.Equal(t, tc.exc, exc.Name)
			require.NotNil(t, exc.Message)
			assert.Equal(t, tc.message, *exc.Message)
			require.NotNil(t, exc.Traceback)
			tb := *exc.Traceback
			assert.True(t, strings.HasSuffix(tb, tc.lastLine), "traceback ends with %q:\n%s", tc.lastLine, tb)
			assert.NotContains(t, tb, RunnerName, "runner frames are filtered")
			assert.NotContains(t, tb, k.workspace)
			assert.False(t, strings.HasSuffix(tb, "\n"))
			for _, s := range tc.shows {
				assert.Contains(t, tb, s)
			}
		})
	}
	// The kernel survived every one of them.
	assert.Equal(t, "1\n", k.eval(t, "after", "print(x)", nil).stdout)
}

func TestSyntaxErrorShowsTheOffendingLine(t *testing.T) {
	k := startKernel(t, kernelOptions{})
	k.init(t)
	exc := k.eval(t, "c1", "x = 1\ny = (\n", nil).exception(t)
	assert.Equal(t, "error", exc.Kind)
	assert.Equal(t, "SyntaxError", exc.Name)
	tb := *exc.Traceback
	assert.NotContains(t, tb, "Traceback (most recent call last)", "only runner frames were left")
	assert.Contains(t, tb, `File "<cell>", line 2`)
	assert.Contains(t, tb, "    y = (")
	assert.Contains(t, tb, "SyntaxError: ")
	assert.NotContains(t, tb, RunnerName)
}

func TestTracebackShowsTheLineOfTheCellThatDefinedAFunction(t *testing.T) {
	k := startKernel(t, kernelOptions{})
	k.init(t)
	k.eval(t, "c1", "def fail():\n    raise LookupError('from cell one')\n", nil)
	exc := k.eval(t, "c2", "a = 1\nb = 2\nfail()\n", nil).exception(t)
	assert.Equal(t, "Traceback (most recent call last):\n"+
		"  File \"<cell>\", line 3, in <module>\n"+
		"    fail()\n"+
		"  File \"<cell>\", line 2, in fail\n"+
		"    raise LookupError('from cell one')\n"+
		"LookupError: from cell one", *exc.Traceback)
}

func TestTracebackKeepsUserModuleFramesAndTheImportLineOffset(t *testing.T) {
	k := startKernel(t, kernelOptions{tools: []string{"read"}})
	k.init(t)
	require.NoError(t, os.WriteFile(filepath.Join(k.cwd, "usermod.py"), []byte("def explode():\n    return 1 / 0\n"), 0o600))
	b := bridge{Dir: newBridgeDir(t, "rpc-1"), Token: testToken}
	code := RenderScript("import sys, os\nsys.path.insert(0, os.getcwd())\nimport usermod\nusermod.explode()", []string{"read"})
	exc := k.eval(t, "c1", code, map[string]any{"bridge": b}).exception(t)
	tb := *exc.Traceback
	assert.Contains(t, tb, "File \"<cell>\", line 5, in <module>\n    usermod.explode()\n", "one injected import line")
	assert.Contains(t, tb, filepath.Join(k.cwd, "usermod.py")+"\", line 2, in explode\n    return 1 / 0\n")
	assert.True(t, strings.HasSuffix(tb, "ZeroDivisionError: division by zero"))
}

func TestRecursionTracebackCollapsesRepeatedLines(t *testing.T) {
	k := startKernel(t, kernelOptions{})
	k.init(t)
	exc := k.eval(t, "c1", "def down(n):\n    return down(n + 1)\ndown(0)", nil).exception(t)
	assert.Equal(t, "RecursionError", exc.Name)
	assert.Contains(t, *exc.Traceback, "more times]")
	assert.Less(t, len(*exc.Traceback), 2000)
}

func TestCaughtInputShowsUnsupportedInput(t *testing.T) {
	k := startKernel(t, kernelOptions{})
	k.init(t)
	res := k.eval(t, "c1", "try:\n    input()\nexcept Exception as e:\n    print(type(e).__name__, isinstance(e, RuntimeError))", nil)
	assert.Equal(t, "UnsupportedInput True\n", res.stdout)
	assert.Empty(t, res.exceptions)
}

func TestSubprocessesGetNoStdin(t *testing.T) {
	k := startKernel(t, kernelOptions{})
	k.init(t)
	res := k.eval(t, "c1", "import subprocess, sys\n"+
		"r = subprocess.run([sys.executable, '-c', 'import sys; print(sys.stdin)'], capture_output=True, text=True)\n"+
		"print(r.stdout.strip())", nil)
	assert.Equal(t, "None\n", res.stdout, "fd 0 is close-on-exec")
}

func TestHugeExceptionIsBoundedAndTheKernelSurvives(t *testing.T) {
	k := startKernel(t, kernelOptions{})
	k.init(t)
	res := k.eval(t, "c1", "E = type('E' * 2_000_000, (Exception,), {})\nraise E('m\\u00e9' * 3_000_000)", nil)
	exc := res.exception(t)
	raw := res.frames[len(res.frames)-2]
	require.Equal(t, "exception", raw.Type)
	assert.Less(t, raw.size, 192<<10)
	assert.True(t, strings.HasSuffix(exc.Name, "... [truncated]"))
	assert.True(t, strings.HasSuffix(*exc.Message, "... [truncated]"))
	assert.True(t, strings.HasSuffix(*exc.Traceback, "... [truncated]"))
	assert.Equal(t, "2\n", k.eval(t, "c2", "print(1 + 1)", nil).stdout)
}

func TestLoneSurrogatesInExceptionsBecomeReplacementCharacters(t *testing.T) {
	k := startKernel(t, kernelOptions{})
	k.init(t)
	exc := k.eval(t, "c1", "raise ValueError('a\\ud800b')", nil).exception(t)
	assert.Equal(t, "a\ufffdb", *exc.Message)
	assert.True(t, strings.HasSuffix(*exc.Traceback, "ValueError: a\ufffdb"))
}

func TestSIGINTInterruptsASleepingCell(t *testing.T) {
	k := startKernel(t, kernelOptions{})
	k.init(t)
	k.startCell(t, "c1", "import time\nprint('sleeping', flush=True)\ntime.sleep(60)\n", nil)
	var seen string
	for seen != "sleeping\n" {
		f := k.next(t)
		require.Equal(t, "stream", f.Type)
		seen += string(decodeChunk(t, f))
	}
	require.NoError(t, syscall.Kill(-k.cmd.Process.Pid, syscall.SIGINT))
	res := k.finishCell(t, "c1")
	exc := res.exception(t)
	assert.Equal(t, "interrupted", exc.Kind)
	assert.Equal(t, "KeyboardInterrupt", exc.Name)
	assert.Contains(t, *exc.Traceback, `File "<cell>", line `)
	assert.True(t, strings.HasSuffix(*exc.Traceback, "\nKeyboardInterrupt"))
	assert.Equal(t, "alive\n", k.eval(t, "c2", "print('alive')", nil).stdout)
}

func TestRequestErrorsAreFatal(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "gone")
	cases := []struct {
		name   string
		init   bool
		line   string
		reason string
	}{
		{"not JSON", false, "{nope", "request is not valid JSON"},
		{"not UTF-8", false, "\xff\xfe\n", "request is not valid JSON"},
		{"not an object", false, "[1, 2]", "request is not a JSON object"},
		{"no version", false, `{"type":"init","cwd":"/"}`, "unsupported protocol version"},
		{"version 2", false, `{"v":2,"type":"init","cwd":"/"}`, "unsupported protocol version"},
		{"version 1.0", false, `{"v":1.0,"type":"init","cwd":"/"}`, "unsupported protocol version"},
		{"version true", false, `{"v":true,"type":"init","cwd":"/"}`, "unsupported protocol version"},
		{"version string", false, `{"v":"1","type":"init","cwd":"/"}`, "unsupported protocol version"},
		{"init without cwd", false, `{"v":1,"type":"init"}`, "init requires a cwd string"},
		{"init with empty cwd", false, `{"v":1,"type":"init","cwd":""}`, "init requires a cwd string"},
		{"init with numeric cwd", false, `{"v":1,"type":"init","cwd":5}`, "init requires a cwd string"},
		{"eval without id", true, `{"v":1,"type":"eval","code":"pass"}`, "eval requires an id string"},
		{"eval with empty id", true, `{"v":1,"type":"eval","id":"","code":"pass"}`, "eval requires an id string"},
		{"eval without code", true, `{"v":1,"type":"eval","id":"c1"}`, "eval requires a code string"},
		{"eval with null code", true, `{"v":1,"type":"eval","id":"c1","code":null}`, "eval requires a code string"},
		{"eval with empty cwd", true, `{"v":1,"type":"eval","id":"c1","code":"pass","cwd":""}`, "eval cwd must be a non-empty string when present"},
		{"eval with numeric cwd", true, `{"v":1,"type":"eval","id":"c1","code":"pass","cwd":7}`, "eval cwd must be a non-empty string when present"},
		{"unknown type", false, `{"v":1,"type":"reboot"}`, "unknown request type: 'reboot'"},
		{"missing type", false, `{"v":1}`, "unknown request type: None"},
		{"duplicate init", true, `{"v":1,"type":"init","cwd":"/"}`, "duplicate init request"},
		{"inaccessible init cwd", false, `{"v":1,"type":"init","cwd":` + quote(missing) + `}`, "init cwd is not accessible: " + missing},
		{"eval before init", false, `{"v":1,"type":"eval","id":"c1","code":"pass"}`, "eval before init"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := startKernel(t, kernelOptions{})
			if tc.init {
				k.init(t)
			}
			line := tc.line
			if !strings.HasSuffix(line, "\n") {
				line += "\n"
			}
			k.sendRaw(t, line)
			frames := k.rest(t)
			require.Len(t, frames, 1, "fatal is the last frame")
			require.Empty(t, frames[0].bad)
			assert.Equal(t, "fatal", frames[0].Type)
			require.NotNil(t, frames[0].Reason)
			assert.Equal(t, tc.reason, *frames[0].Reason)
			assert.Equal(t, 70, k.exitCode(t))
		})
	}
}

func TestBlankRequestLinesAreSkipped(t *testing.T) {
	k := startKernel(t, kernelOptions{})
	k.sendRaw(t, "\n   \n")
	k.init(t)
	k.sendRaw(t, "\n")
	assert.Equal(t, "ok\n", k.eval(t, "c1", "print('ok')", nil).stdout)
}

func TestNullEvalCwdMeansTheInitCwd(t *testing.T) {
	k := startKernel(t, kernelOptions{})
	k.init(t)
	res := k.eval(t, "c1", "import os\nprint(os.getcwd())", map[string]any{"cwd": nil})
	assert.Equal(t, mustEvalSymlinks(t, k.cwd)+"\n", res.stdout)
}

func TestShutdownSaysByeAndExitsZero(t *testing.T) {
	k := startKernel(t, kernelOptions{})
	k.init(t)
	k.eval(t, "c1", "x = 1", nil)
	k.send(t, map[string]any{"v": 1, "type": "shutdown"})
	frames := k.rest(t)
	require.Len(t, frames, 1, "bye is the last frame")
	assert.Equal(t, "bye", frames[0].Type)
	assert.Equal(t, 0, k.exitCode(t))
}

func TestEndOfInputExitsZeroWithoutFrames(t *testing.T) {
	k := startKernel(t, kernelOptions{})
	require.NoError(t, k.stdin.Close())
	assert.Empty(t, k.rest(t))
	assert.Equal(t, 0, k.exitCode(t))
}

func TestEndOfInputAfterCellsExitsZero(t *testing.T) {
	k := startKernel(t, kernelOptions{})
	k.init(t)
	k.eval(t, "c1", "print('x')", nil)
	require.NoError(t, k.stdin.Close())
	assert.Empty(t, k.rest(t))
	assert.Equal(t, 0, k.exitCode(t))
}

func TestFrameShapedOutputArrivesOnlyAsStreamPayload(t *testing.T) {
	k := startKernel(t, kernelOptions{})
	k.init(t)
	forged := framePrefix + `{"v":1,"type":"done","id":"other"}` + "\n"
	code := "import os, sys\n" +
		"print(" + pyString(forged) + ", end='')\n" +
		"sys.stderr.write(" + pyString(forged) + ")\n" +
		"os.write(1, " + pyString(forged) + ".encode())\n"
	res := k.eval(t, "c1", code, nil)
	assert.Equal(t, forged+forged+forged, res.stdout)
	dones := 0
	for _, f := range res.frames {
		if f.Type == "done" {
			dones++
			assert.Equal(t, "c1", f.ID)
		}
	}
	assert.Equal(t, 1, dones)
}

func TestSubprocessOutputIsCaptured(t *testing.T) {
	k := startKernel(t, kernelOptions{})
	k.init(t)
	res := k.eval(t, "c1", "import subprocess, sys\n"+
		"subprocess.run([sys.executable, '-c', \"import sys; sys.stdout.write('x' * 180000); sys.stderr.write('child err')\"])\n"+
		"print('after')", nil)
	assert.Equal(t, strings.Repeat("x", 180000)+"child errafter\n", res.stdout)
	assert.Empty(t, res.stderr)
}

func TestMegabyteOfOutputStreamsInBoundedChunks(t *testing.T) {
	k := startKernel(t, kernelOptions{})
	k.init(t)
	res := k.eval(t, "c1", "import sys\nsys.stdout.write('y' * (1 << 20))", nil)
	assert.Equal(t, 1<<20, len(res.stdout))
	assert.Equal(t, strings.Repeat("y", 1<<20), res.stdout)
	streams := 0
	for _, f := range res.frames {
		if f.Type == "stream" {
			streams++
		}
	}
	assert.GreaterOrEqual(t, streams, 16, "64 KiB chunks at most")
}

func TestCellChdirDoesNotLeak(t *testing.T) {
	k := startKernel(t, kernelOptions{})
	k.init(t)
	elsewhere := t.TempDir()
	k.eval(t, "c1", "import os\nos.chdir("+pyString(elsewhere)+")", nil)
	assert.Equal(t, mustEvalSymlinks(t, k.cwd)+"\n", k.eval(t, "c2", "print(os.getcwd())", nil).stdout)

	explicit := t.TempDir()
	res := k.eval(t, "c3", "print(os.getcwd())", map[string]any{"cwd": explicit})
	assert.Equal(t, mustEvalSymlinks(t, explicit)+"\n", res.stdout)
	assert.Equal(t, mustEvalSymlinks(t, k.cwd)+"\n", k.eval(t, "c4", "print(os.getcwd())", nil).stdout)
}

func TestDeletedCellCwdRaisesInsideTheCell(t *testing.T) {
	k := startKernel(t, kernelOptions{})
	k.init(t)
	gone := filepath.Join(t.TempDir(), "gone")
	exc := k.eval(t, "c1", "print('never')", map[string]any{"cwd": gone}).exception(t)
	assert.Equal(t, "RuntimeError", exc.Name)
	assert.Equal(t, "cell cwd is no longer accessible: "+gone+" (No such file or directory)", *exc.Message)
	assert.Equal(t, "ok\n", k.eval(t, "c2", "print('ok')", nil).stdout)
}

func TestThreadsAreTaggedWithTheCellThatMadeThem(t *testing.T) {
	k := startKernel(t, kernelOptions{})
	k.init(t)
	k.eval(t, "c1", "import threading\n"+
		"go = threading.Event()\n"+
		"tags = {}\n"+
		"def first():\n"+
		"    go.wait()\n"+
		"    child = threading.Thread(target=lambda: None)\n"+
		"    tags['child of cell one'] = child._exec_gen\n"+
		"t1 = threading.Thread(target=first)\n"+
		"t1.start()\n"+
		"tags['cell one'] = t1._exec_gen\n", nil)
	res := k.eval(t, "c2", "go.set()\n"+
		"t1.join()\n"+
		"t2 = threading.Thread(target=lambda: None)\n"+
		"tags['cell two'] = t2._exec_gen\n"+
		"tags['main'] = getattr(threading.main_thread(), '_exec_gen', None)\n"+
		"print(sorted(tags.items()))", nil)
	assert.Equal(t, "[('cell one', 1), ('cell two', 2), ('child of cell one', 1), ('main', None)]\n", res.stdout)
}

func TestLateThreadOutputIsDroppedCountedAndRefusedTheBridge(t *testing.T) {
	tools := []string{"read"}
	k := startKernel(t, kernelOptions{tools: tools})
	k.init(t)
	first := bridge{Dir: newBridgeDir(t, "rpc-1"), Token: "t1"}
	second := bridge{Dir: newBridgeDir(t, "rpc-2"), Token: "t2"}
	k.eval(t, "c1", RenderScript("import sys, threading\n"+
		"go = threading.Event()\n"+
		"finished = threading.Event()\n"+
		"result = []\n"+
		"def late():\n"+
		"    go.wait()\n"+
		"    print('late output from cell one')\n"+
		"    sys.stdout.buffer.write(b'late bytes\\n')\n"+
		"    sys.stderr.write('late error\\n')\n"+
		"    try:\n"+
		"        read('x')\n"+
		"        result.append('allowed')\n"+
		"    except ToolError as e:\n"+
		"        result.append(str(e))\n"+
		"    finished.set()\n"+
		"threading.Thread(target=late).start()\n", tools), map[string]any{"bridge": first})

	res := k.eval(t, "c2", RenderScript("go.set()\nfinished.wait()\nprint('cell two')", tools), map[string]any{"bridge": second})
	assert.Equal(t, "cell two\n", res.stdout)
	assert.Empty(t, res.stderr)
	late := len("late output from cell one\n") + len("late bytes\n") + len("late error\n")
	assert.Equal(t, late, *res.done.Dropped)

	res = k.eval(t, "c3", "print(result[0])", nil)
	assert.Equal(t, "exec_tools bridge belongs to a finished cell\n", res.stdout)
	assert.Equal(t, 0, *res.done.Dropped, "the count is per cell")
	assert.Empty(t, listDir(t, first.Dir))
	assert.Empty(t, listDir(t, second.Dir))
}

func TestDescriptorWritesBetweenCellsNeverReachTheNextCell(t *testing.T) {
	k := startKernel(t, kernelOptions{})
	k.init(t)
	flags := t.TempDir()
	goFile, ackFile := filepath.Join(flags, "go"), filepath.Join(flags, "ack")
	k.eval(t, "c1", "import os, threading, time\n"+
		"def later():\n"+
		"    while not os.path.exists("+pyString(goFile)+"):\n"+
		"        time.sleep(0.002)\n"+
		"    os.write(1, b'between cells\\n')\n"+
		"    open("+pyString(ackFile)+", 'w').close()\n"+
		"threading.Thread(target=later, daemon=True).start()\n", nil)
	require.NoError(t, os.WriteFile(goFile, nil, 0o600))
	waitForFile(t, ackFile)
	res := k.eval(t, "c2", "print('two')", nil)
	assert.Equal(t, "two\n", res.stdout)
	assert.Equal(t, len("between cells\n"), *res.done.Dropped)
}

func TestEachCellGetsAFreshBridge(t *testing.T) {
	tools := []string{"read"}
	k := startKernel(t, kernelOptions{tools: tools})
	k.init(t)
	first := bridge{Dir: newBridgeDir(t, "rpc-1"), Token: "t1", MaxTextBytes: 100}
	second := bridge{Dir: newBridgeDir(t, "rpc-2"), Token: "t2", MaxTextBytes: 100}
	res := k.eval(t, "c1", RenderScript("text('a' * 60)\n"+
		"try:\n"+
		"    text('a' * 60)\n"+
		"except ToolError as e:\n"+
		"    print(e)", tools), map[string]any{"bridge": first})
	assert.Equal(t, "text() byte budget exceeded (80 bytes accumulated, 80 more requested, cap 100)\n", res.stdout)

	res = k.eval(t, "c2", RenderScript("text('b' * 60)\n"+
		"b = exec_tools._BRIDGE\n"+
		"print(b.dir == "+pyString(second.Dir)+", b.token, b.budget, b.gen, b.text_bytes)", tools),
		map[string]any{"bridge": second})
	assert.Equal(t, "True t2 100 2 80\n", res.stdout)
	assert.Equal(t, []string{"text-1.json"}, withoutMACs(listDir(t, first.Dir)))
	assert.Equal(t, []string{"text-1.json"}, withoutMACs(listDir(t, second.Dir)))
	body, err := os.ReadFile(frameFile(t, second.Dir, "text-1.json"))
	require.NoError(t, err)
	assert.JSONEq(t, `{"n": 1, "text": "`+strings.Repeat("b", 60)+`"}`, string(body))
}

func TestBridgeNamesAreBoundInTheNamespace(t *testing.T) {
	k := startKernel(t, kernelOptions{tools: allTools})
	k.init(t)
	b := bridge{Dir: newBridgeDir(t, "rpc-1"), Token: "t1"}
	res := k.eval(t, "c1", "print(sorted(n for n in ('ToolError', 'read', 'grep', 'find', 'ls', 'webfetch', 'text', 'notify', 'batch', 'exec_tools') if n in globals()))",
		map[string]any{"bridge": b})
	assert.Equal(t, "['ToolError', 'batch', 'exec_tools', 'find', 'grep', 'ls', 'notify', 'read', 'text', 'webfetch']\n", res.stdout)
}

func TestACellWithoutABridgeCannotReachThePreviousOne(t *testing.T) {
	tools := []string{"read"}
	k := startKernel(t, kernelOptions{tools: tools})
	k.init(t)
	first := bridge{Dir: newBridgeDir(t, "rpc-1"), Token: "t1"}
	k.eval(t, "c1", RenderScript("pass", tools), map[string]any{"bridge": first})
	res := k.eval(t, "c2", RenderScript("try:\n    text('x')\nexcept ToolError as e:\n    print(e)", tools), nil)
	assert.Equal(t, "exec_tools is not configured for this cell\n", res.stdout)
	assert.Empty(t, listDir(t, first.Dir))
}

func TestInvalidBridgesRaiseInsideTheCell(t *testing.T) {
	k := startKernel(t, kernelOptions{tools: []string{"read"}})
	k.init(t)
	cases := []struct {
		bridge  any
		message string
	}{
		{"not an object", "eval bridge must be an object with dir and token"},
		{map[string]any{"token": "t"}, "eval bridge is missing its dir"},
		{map[string]any{"dir": "", "token": "t"}, "eval bridge is missing its dir"},
		{map[string]any{"dir": "/x"}, "eval bridge is missing its token"},
		{map[string]any{"dir": "/x", "token": 5}, "eval bridge is missing its token"},
	}
	for i, tc := range cases {
		exc := k.eval(t, fmt.Sprintf("c%d", i), "print('never')", map[string]any{"bridge": tc.bridge}).exception(t)
		assert.Equal(t, "RuntimeError", exc.Name)
		assert.Equal(t, tc.message, *exc.Message)
	}
	assert.Equal(t, "ok\n", k.eval(t, "last", "print('ok')", nil).stdout)
}

func TestMissingShimRaisesInsideTheCell(t *testing.T) {
	k := startKernel(t, kernelOptions{})
	require.NoError(t, os.Remove(filepath.Join(k.workspace, ModuleName+".py")))
	k.init(t)
	b := bridge{Dir: newBridgeDir(t, "rpc-1"), Token: "t1"}
	exc := k.eval(t, "c1", "pass", map[string]any{"bridge": b}).exception(t)
	assert.Equal(t, "RuntimeError", exc.Name)
	assert.Equal(t, "exec_tools was not staged next to the runner; helper calls are unavailable", *exc.Message)
}

func TestShimImportWritesNoBytecode(t *testing.T) {
	k := startKernel(t, kernelOptions{tools: []string{"read"}})
	k.init(t)
	b := bridge{Dir: newBridgeDir(t, "rpc-1"), Token: "t1"}
	k.eval(t, "c1", "pass", map[string]any{"bridge": b})
	assert.Equal(t, []string{ModuleName + ".py", RunnerName}, listDir(t, k.workspace))
}

func TestBellsReachTheShimWhenTheyAreOpen(t *testing.T) {
	tools := []string{"read"}
	for _, withBells := range []bool{true, false} {
		t.Run(fmt.Sprintf("bells=%v", withBells), func(t *testing.T) {
			k := startKernel(t, kernelOptions{tools: tools, bells: withBells})
			k.init(t)
			var ring *os.File
			if withBells {
				ring = k.bells.responseWrite
			}
			for i := 1; i <= 2; i++ {
				b := bridge{Dir: newBridgeDir(t, fmt.Sprintf("rpc-%d", i)), Token: testToken}
				host := startResponder(t, b.Dir, ring)
				id := fmt.Sprintf("c%d", i)
				k.startCell(t, id, RenderScript("b = exec_tools._BRIDGE.bells\n"+
					"print(None if b is None else (b.ring_fd, b.wake_fd), read('a.txt'))", tools), map[string]any{"bridge": b})
				req := host.next(t)
				assert.Equal(t, 1, req.ID, "request ids restart every cell")
				assert.Equal(t, "read", req.Tool)
				host.answer(t, req.file, okResponse(req.file, fmt.Sprintf("content %d", i)))
				res := k.finishCell(t, id)
				if withBells {
					assert.Equal(t, fmt.Sprintf("(3, 4) content %d\n", i), res.stdout)
				} else {
					assert.Equal(t, fmt.Sprintf("None content %d\n", i), res.stdout)
				}
			}
			if withBells {
				res := k.eval(t, "inherit", "import subprocess, sys\n"+
					"r = subprocess.run([sys.executable, '-c', 'import os\\nfor fd in (3, 4):\\n    try:\\n        os.fstat(fd)\\n        print(fd)\\n    except OSError:\\n        pass'], capture_output=True, text=True)\n"+
					"print(repr(r.stdout))", nil)
				assert.Equal(t, "''\n", res.stdout, "children never hold the bells")
			}
		})
	}
}

func TestForkedChildNeverSpeaksForTheKernel(t *testing.T) {
	k := startKernel(t, kernelOptions{})
	k.init(t)
	res := k.eval(t, "c1", "import os, sys\n"+
		"pid = os.fork()\n"+
		"if pid == 0:\n"+
		"    print('child', flush=True)\n"+
		"else:\n"+
		"    _, status = os.waitpid(pid, 0)\n"+
		"    print('parent', os.waitstatus_to_exitcode(status) if hasattr(os, 'waitstatus_to_exitcode') else status)\n", nil)
	assert.Equal(t, "child\nparent 0\n", res.stdout)
	assert.Equal(t, "ok\n", k.eval(t, "c2", "print('ok')", nil).stdout)
}

func TestDoneFollowsEveryStreamOfItsCell(t *testing.T) {
	k := startKernel(t, kernelOptions{})
	k.init(t)
	for i := range 20 {
		id := fmt.Sprintf("c%d", i)
		res := k.eval(t, id, "import threading\n"+
			"t = threading.Thread(target=lambda: print('from a thread ' + '"+strconv.Itoa(i)+"'))\n"+
			"t.start()\n"+
			"t.join()\n"+
			"print('main')", nil)
		assert.Contains(t, res.stdout, "from a thread "+strconv.Itoa(i)+"\n")
		assert.Contains(t, res.stdout, "main\n")
	}
}

func TestAChattyThreadOfAnEarlierCellNeverReachesLaterCells(t *testing.T) {
	k := startKernel(t, kernelOptions{})
	k.init(t)
	k.eval(t, "c0", "import sys, threading\n"+
		"stop = threading.Event()\n"+
		"rounds = [0]\n"+
		"def chatter():\n"+
		"    while not stop.is_set():\n"+
		"        print('noise')\n"+
		"        sys.stdout.buffer.write(b'raw noise\\n')\n"+
		"        sys.stderr.write('error noise\\n')\n"+
		"        rounds[0] += 1\n"+
		"threading.Thread(target=chatter, daemon=True).start()\n", nil)
	// Each cell waits until the thread has chattered during it, so the
	// noise is there to be kept out however the threads are scheduled.
	dropped := 0
	for i := 1; i <= 10; i++ {
		res := k.eval(t, fmt.Sprintf("c%d", i), fmt.Sprintf("import time\nn0 = rounds[0]\nwhile rounds[0] < n0 + 2:\n    time.sleep(0.001)\nprint('cell %d')", i), nil)
		assert.Equal(t, fmt.Sprintf("cell %d\n", i), res.stdout)
		assert.Empty(t, res.stderr)
		dropped += *res.done.Dropped
	}
	assert.Positive(t, dropped)
	k.eval(t, "end", "stop.set()", nil)
}

func TestLosingTheControlPipeExitsSeventyFive(t *testing.T) {
	python := proctest.Python(t)
	workspace := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(workspace, RunnerName), []byte(Runner()), 0o600))
	inRead, inWrite, err := os.Pipe()
	require.NoError(t, err)
	defer func() { _ = inWrite.Close() }()
	outRead, outWrite, err := os.Pipe()
	require.NoError(t, err)
	require.NoError(t, outRead.Close(), "nobody will ever read a frame")
	cmd := exec.Command(python, "-u", RunnerName)
	cmd.Dir = workspace
	cmd.Env = pythonEnv()
	cmd.Stdin, cmd.Stdout = inRead, outWrite
	require.NoError(t, cmd.Start())
	_ = inRead.Close()
	_ = outWrite.Close()
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Process.Kill()
		<-done
	})
	_, err = fmt.Fprintf(inWrite, `{"v":1,"type":"init","cwd":%s}`+"\n", quote(workspace))
	require.NoError(t, err)
	select {
	case <-done:
	case <-time.After(frameWait):
		t.Fatal("runner did not exit")
	}
	assert.Equal(t, 75, cmd.ProcessState.ExitCode())
}

func TestAClosedStdoutDoesNotKillTheKernel(t *testing.T) {
	k := startKernel(t, kernelOptions{})
	k.init(t)
	k.eval(t, "c1", "import sys\nsys.stdout.close()", nil)
	res := k.eval(t, "c2", "import os\nos.write(2, b'still here\\n')", nil)
	assert.Equal(t, "still here\n", res.stdout)
}

func TestAStreamWrapperWithItsOwnLockDoesNotDeadlockTheCellEnd(t *testing.T) {
	k := startKernel(t, kernelOptions{})
	k.init(t)
	res := k.eval(t, "c1", "import sys, threading\n"+
		"class Locked:\n"+
		"    def __init__(self, inner):\n"+
		"        self.inner, self.lock = inner, threading.Lock()\n"+
		"    def write(self, s):\n"+
		"        with self.lock:\n"+
		"            return self.inner.write(s)\n"+
		"    def flush(self):\n"+
		"        with self.lock:\n"+
		"            return self.inner.flush()\n"+
		"sys.stdout = Locked(sys.stdout)\n"+
		"stop = threading.Event()\n"+
		"def chatter():\n"+
		"    while not stop.is_set():\n"+
		"        print('x')\n"+
		"threading.Thread(target=chatter, daemon=True).start()\n", nil)
	assert.Empty(t, res.exceptions)
	for i := range 5 {
		res = k.eval(t, fmt.Sprintf("c%d", i+2), "print('main')", nil)
		assert.Equal(t, "main\n", res.stdout)
	}
	k.eval(t, "end", "stop.set()", nil)
}

// The whole-character writer cuts long writes at a character start; bytes
// with none (or a partial character at the end) still flow, unchanged.
func TestWritesWithoutACharacterStartStillFlow(t *testing.T) {
	k := startKernel(t, kernelOptions{})
	k.init(t)
	res := k.eval(t, "c1", "import sys\nsys.stdout.buffer.write(b'\\x80' * 10000 + b'\\xc3')\nsys.stdout.buffer.write(b'\\xa9' + 'é'.encode() * 5000)\nsys.stdout.flush()\n", nil)
	assert.Equal(t, strings.Repeat("\x80", 10000)+strings.Repeat("é", 5001), res.stdout)
	assert.Empty(t, res.exceptions)
}

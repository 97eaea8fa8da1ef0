package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// runSamples is how many times one sample runs each command, after
// runWarmup untimed runs of each.
const (
	runSamples = 20
	runWarmup  = 2
)

// BenchmarkPerfRunOneLiner: the whole `execute-code run` of a one-line
// script (`text('hi')`), from fork to reap, against `python3 -c pass` on
// the same interpreter, alternately: on the interpreter the runtime
// resolves by default and, where it differs, on the one `python3` on
// PATH runs. The goal is run/python <= 1.5.
func BenchmarkPerfRunOneLiner(b *testing.B) {
	markPerfProcesses(b)
	bin := buildCLI(b)
	root := b.TempDir()
	tmp := perfTmpDir(b)
	script := filepath.Join(root, "one.py")
	require.NoError(b, os.WriteFile(script, []byte("text('hi')\n"), 0o644))
	type interp struct{ name, path string }
	pythons := []interp{{"resolved", perfPython(b)}}
	if p := pythonPath(b); p != pythons[0].path {
		pythons = append(pythons, interp{"path", p})
	}
	timeRun := func(python string) time.Duration {
		cmd := exec.Command(bin, "run", "--root", root, script)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "LEMON_EXECUTE_CODE_PYTHON_PATH="+python, "TMPDIR="+tmp)
		t0 := time.Now()
		out, err := cmd.CombinedOutput()
		d := time.Since(t0)
		require.NoError(b, err, string(out))
		require.Contains(b, string(out), "hi")
		return d
	}
	for _, p := range pythons {
		for range runWarmup {
			timeRun(p.path)
			timePythonPass(b, p.path)
		}
	}
	for b.Loop() {
		for _, p := range pythons {
			var runs, passes []time.Duration
			for range runSamples {
				passes = append(passes, timePythonPass(b, p.path))
				runs = append(runs, timeRun(p.path))
			}
			run, pass := ms(median(runs)), ms(median(passes))
			b.ReportMetric(pass, p.name+"-python-c-pass-ms")
			b.ReportMetric(run, p.name+"-run-ms")
			b.ReportMetric(run/pass, p.name+"-run/python-ratio")
		}
	}
}

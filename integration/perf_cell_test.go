package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/config"
)

// perfCells is how many `x = 1` cells one sample times on each path.
const perfCells = 200

// BenchmarkPerfCell: the cell `x = 1` on a warm kernel at the Go API
// (Execute) and through `serve` (the built command, a JSON line on its
// stdin timed to its result line on stdout), alternately, against the
// pipe floor; serve/api is what the JSON-lines path adds.
func BenchmarkPerfCell(b *testing.B) {
	bin := buildCLI(b)
	e := newPerfEnv(b, nil, func(c *config.Config) { c.KernelMode = config.Session })
	python := perfPython(b)
	owner, err := e.rt.Attach(context.Background(), executecode.Scope{SessionID: "cell", AgentID: "main"})
	require.NoError(b, err)
	defer func() { require.NoError(b, owner.Detach(context.Background())) }()
	e.cell(owner, "x = 1") // the kernel starts
	sv := startServe(b, bin, e.root, e.tmp)
	sv.call(b, `{"id":"a","op":"attach","session":"s","agent":"main"}`, "ok")
	sv.call(b, `{"id":"w","op":"execute","session":"s","script":"x = 1"}`, "result")
	id := 0
	for b.Loop() {
		f := measureFloor(b, python)
		api := make([]time.Duration, perfCells)
		served := make([]time.Duration, perfCells)
		for i := range perfCells {
			t0 := time.Now()
			res := e.cell(owner, "x = 1")
			api[i] = time.Since(t0)
			require.True(b, res.Details.KernelReused != nil && *res.Details.KernelReused)
			id++
			line := fmt.Sprintf(`{"id":%d,"op":"execute","session":"s","script":"x = 1"}`, id)
			t0 = time.Now()
			sv.call(b, line, "result")
			served[i] = time.Since(t0)
		}
		apiMed, serveMed := us(median(api)), us(median(served))
		reportFloor(b, f)
		b.ReportMetric(apiMed, "api-cell-median-us")
		b.ReportMetric(us(percentile(api, 99)), "api-cell-p99-us")
		b.ReportMetric(serveMed, "serve-cell-median-us")
		b.ReportMetric(us(percentile(served, 99)), "serve-cell-p99-us")
		b.ReportMetric(apiMed/f.rttUS, "api-cell/floor-ratio")
		b.ReportMetric(serveMed/f.rttUS, "serve-cell/floor-ratio")
		b.ReportMetric(serveMed/apiMed, "serve/api-ratio")
	}
}

// serveProc is a running `execute-code serve` and its pipes.
type serveProc struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines *bufio.Scanner
}

// startServe starts the command's serve over root, staging in tmp; the
// benchmark's cleanup closes its stdin and waits for it to exit.
func startServe(b *testing.B, bin, root, tmp string) *serveProc {
	b.Helper()
	cmd := exec.Command(bin, "serve", "--root", root)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	require.NoError(b, err)
	out, err := cmd.StdoutPipe()
	require.NoError(b, err)
	require.NoError(b, cmd.Start())
	sv := &serveProc{cmd: cmd, in: in, lines: bufio.NewScanner(out)}
	sv.lines.Buffer(make([]byte, 1<<20), 1<<20)
	b.Cleanup(func() {
		_ = in.Close()
		require.NoError(b, cmd.Wait())
	})
	return sv
}

// call writes one request line and reads the next answer, which must
// carry the field want.
func (sv *serveProc) call(b *testing.B, line, want string) {
	_, err := io.WriteString(sv.in, line+"\n")
	require.NoError(b, err)
	require.True(b, sv.lines.Scan(), "serve ended: %v", sv.lines.Err())
	var answer map[string]json.RawMessage
	require.NoError(b, json.Unmarshal(sv.lines.Bytes(), &answer), sv.lines.Text())
	require.Contains(b, answer, want, sv.lines.Text())
}

// newKernelSamples is how many new kernels one sample starts per
// variant; newKernelRest is the pause after each, in which a warm pool
// refills and the previous kernel's teardown ends.
const (
	newKernelSamples = 8
	newKernelRest    = 300 * time.Millisecond
)

// BenchmarkPerfNewKernel: a new kernel's first result (attach a fresh
// session, time its first cell `x = 1`, detach), and a per-call run of
// `text('hi')`, each with the interpreter pool warm (warm_interpreters
// = 1) and cold (0), alternately, against python's own start. Where the
// configuration has no warm_interpreters key only the cold variant, what
// exists, is measured.
func BenchmarkPerfNewKernel(b *testing.B) {
	markPerfProcesses(b)
	python := perfPython(b)
	root := b.TempDir()
	type variant struct {
		name     string
		session  *executecode.Runtime
		perCall  *executecode.Runtime
		kernels  []time.Duration
		perCalls []time.Duration
	}
	mk := func(name string, warm int) (*variant, bool) {
		sc, ok := perfConfig(b, warm, func(c *config.Config) { c.KernelMode = config.Session })
		pc, _ := perfConfig(b, warm, nil)
		if !ok && warm != 0 {
			return nil, false
		}
		return &variant{name: name, session: newPerfRuntime(b, sc, root, perfTmpDir(b)),
			perCall: newPerfRuntime(b, pc, root, perfTmpDir(b))}, true
	}
	cold, _ := mk("cold", 0)
	variants := []*variant{cold}
	if warm, ok := mk("warm", 1); ok {
		variants = append(variants, warm)
	}
	n := 0
	firstResult := func(rt *executecode.Runtime) time.Duration {
		n++
		owner, err := rt.Attach(context.Background(), executecode.Scope{SessionID: fmt.Sprint("new-", n), AgentID: "main"})
		require.NoError(b, err)
		t0 := time.Now()
		res, err := rt.Execute(context.Background(), executecode.Call{Script: "x = 1", Owner: owner})
		d := time.Since(t0)
		require.NoError(b, err)
		require.True(b, res.Succeeded(), res.Text())
		require.Empty(b, res.Details.FallbackReason)
		require.NoError(b, owner.Detach(context.Background()))
		return d
	}
	perCall := func(rt *executecode.Runtime) time.Duration {
		t0 := time.Now()
		res, err := rt.Execute(context.Background(), executecode.Call{Script: "text('hi')"})
		d := time.Since(t0)
		require.NoError(b, err)
		require.Equal(b, []string{"hi"}, res.Blocks, res.Text())
		return d
	}
	for _, v := range variants { // warm-up: staging roots, guard, read sets
		firstResult(v.session)
		perCall(v.perCall)
		time.Sleep(newKernelRest)
	}
	for b.Loop() {
		start := make([]time.Duration, 0, 2*newKernelSamples)
		for _, v := range variants {
			v.kernels, v.perCalls = v.kernels[:0], v.perCalls[:0]
		}
		for range newKernelSamples {
			for _, v := range variants {
				start = append(start, timePythonPass(b, python))
				v.kernels = append(v.kernels, firstResult(v.session))
				v.perCalls = append(v.perCalls, perCall(v.perCall))
				time.Sleep(newKernelRest)
			}
		}
		pass := ms(median(start))
		b.ReportMetric(pass, "python-c-pass-ms")
		for _, v := range variants {
			k, p := ms(median(v.kernels)), ms(median(v.perCalls))
			b.ReportMetric(k, v.name+"-first-result-ms")
			b.ReportMetric(p, v.name+"-percall-run-ms")
			b.ReportMetric(k/pass, v.name+"-first-result/python-ratio")
			b.ReportMetric(p/pass, v.name+"-percall-run/python-ratio")
		}
		if len(variants) == 2 {
			b.ReportMetric(ms(median(variants[1].kernels))/ms(median(cold.kernels)), "warm/cold-first-result-ratio")
		}
	}
}

package integration

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/config"
	"github.com/executecode/executecode/internal/cluster/certs"
)

// The cluster's benchmarks (docs/cluster.md): a session side in this
// process (executecode.WithCluster) and kernel nodes as separate
// processes of the built command (execute-code node --join), over mutual
// TLS on 127.0.0.1; local figures come from a plain session runtime in
// the same run.

// clusterBench is a session side and its kernel nodes.
type clusterBench struct {
	b     *testing.B
	bin   string
	certs string
	rt    *executecode.Runtime
	addr  string
	nodes []*exec.Cmd
}

// newClusterBench starts a session side over root (local capacity 0) and
// n kernel nodes, and waits until all joined.
func newClusterBench(b *testing.B, root string, n int, edit func(*config.Config)) *clusterBench {
	b.Helper()
	markPerfProcesses(b)
	cb := &clusterBench{b: b, bin: buildCLI(b), certs: filepath.Join(b.TempDir(), "certs")}
	// Certificates for more nodes than start now: a benchmark may start
	// one per round.
	names := []string{"session"}
	for i := range max(n, 8) {
		names = append(names, fmt.Sprintf("node%d", i+1))
	}
	_, err := certs.WriteDev(cb.certs, names, time.Now())
	require.NoError(b, err)
	cfg, _ := perfConfig(b, -1, func(c *config.Config) {
		c.KernelMode = config.Session
		if edit != nil {
			edit(c)
		}
	})
	cc := config.DefaultCluster()
	cc.Listen, cc.LocalCapacity = "127.0.0.1:0", 0
	cc.CAFile, cc.CertFile, cc.KeyFile = cb.file("ca.pem"), cb.file("session.pem"), cb.file("session-key.pem")
	rt, err := executecode.New(cfg, executecode.WithRoot(root), executecode.WithTmpDir(perfTmpDir(b)), executecode.WithCluster(cc))
	require.NoError(b, err)
	cb.rt = rt
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(b, rt.Close(ctx))
	})
	cb.addr, err = rt.ClusterAddress(context.Background())
	require.NoError(b, err)
	for i := range n {
		_, _ = cb.startNode(fmt.Sprintf("node%d", i+1))
	}
	cb.waitNodes(n)
	return cb
}

func (cb *clusterBench) file(name string) string { return filepath.Join(cb.certs, name) }

// startNode starts a kernel node process with name's certificate and a
// staging directory of its own (tmp); the benchmark's cleanup ends it.
func (cb *clusterBench) startNode(name string) (cmd *exec.Cmd, tmp string) {
	b := cb.b
	tmp = b.TempDir()
	cmd = exec.Command(cb.bin, "node", "--join", cb.addr, "--root", b.TempDir(), "--capacity", "64",
		"--ca", cb.file("ca.pem"), "--cert", cb.file(name+".pem"), "--key", cb.file(name+"-key.pem"))
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	out, err := cmd.StdoutPipe()
	require.NoError(b, err)
	// Its log lines (a node joined, lost) are not the benchmark's output,
	// which make bench parses.
	cmd.Stderr = nil
	require.NoError(b, cmd.Start())
	listening := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		said := false
		for sc.Scan() {
			if !said && strings.Contains(sc.Text(), "listening on") {
				listening <- true
				said = true
			}
		}
		if !said {
			listening <- false
		}
	}()
	require.True(b, <-listening, "node %s did not start", name)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	cb.nodes = append(cb.nodes, cmd)
	return cmd, tmp
}

// waitNodes waits until the session side counts n kernel nodes.
func (cb *clusterBench) waitNodes(n int) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, err := cb.rt.Snapshot(context.Background())
		require.NoError(cb.b, err)
		if len(s.Nodes) == n {
			return
		}
		require.True(cb.b, time.Now().Before(deadline), "nodes joined: %d of %d", len(s.Nodes), n)
		time.Sleep(20 * time.Millisecond)
	}
}

// attach is an owner of a fresh session on rt; the cleanup detaches it.
func attachBench(b *testing.B, rt *executecode.Runtime, session string) *executecode.Owner {
	b.Helper()
	o, err := rt.Attach(context.Background(), executecode.Scope{SessionID: session, AgentID: "main"})
	require.NoError(b, err)
	b.Cleanup(func() { _ = o.Detach(context.Background()) })
	return o
}

// cellOn runs script as a cell of o and requires it to succeed.
func cellOn(b *testing.B, rt *executecode.Runtime, o *executecode.Owner, script string) executecode.Result {
	b.Helper()
	res, err := rt.Execute(context.Background(), executecode.Call{Script: script, Owner: o, TimeoutMS: 120000})
	require.NoError(b, err)
	require.True(b, res.Succeeded(), res.Text())
	return res
}

// BenchmarkClusterCellAndHelper: the cell `x = 1` and one helper call
// (a sequential read() timed inside python) on a kernel of another
// process over the cluster, against the same on a local kernel, side by
// side in one run.
func BenchmarkClusterCellAndHelper(b *testing.B) {
	markPerfProcesses(b) // before the local runtime: one mark covers both
	root := b.TempDir()
	writeTree(b, root, smallFile)
	edit := func(c *config.Config) { c.MaxRPCCalls = perfRoundTripCalls + 10 }
	local := newPerfRuntime(b, mustConfig(b, edit), root, perfTmpDir(b))
	cb := newClusterBench(b, root, 1, edit)
	lo, ro := attachBench(b, local, "local"), attachBench(b, cb.rt, "remote")
	cellOn(b, local, lo, "x = 1")
	cellOn(b, cb.rt, ro, "x = 1")
	script := strings.ReplaceAll(perfRoundTripScript, "CALLS", strconv.Itoa(perfRoundTripCalls))
	for b.Loop() {
		lc, rc := make([]time.Duration, perfCells), make([]time.Duration, perfCells)
		for i := range perfCells {
			t0 := time.Now()
			cellOn(b, local, lo, "x = 1")
			lc[i] = time.Since(t0)
			t0 = time.Now()
			cellOn(b, cb.rt, ro, "x = 1")
			rc[i] = time.Since(t0)
		}
		lMed, _ := nsPair(b, cellOn(b, local, lo, script).Blocks[0])
		rMed, _ := nsPair(b, cellOn(b, cb.rt, ro, script).Blocks[0])
		b.ReportMetric(us(median(lc)), "local-cell-median-us")
		b.ReportMetric(us(median(rc)), "remote-cell-median-us")
		b.ReportMetric(us(median(rc))/us(median(lc)), "remote/local-cell-ratio")
		b.ReportMetric(lMed/1000, "local-helper-median-us")
		b.ReportMetric(rMed/1000, "remote-helper-median-us")
		b.ReportMetric(rMed/lMed, "remote/local-helper-ratio")
	}
}

// mustConfig is the benchmarks' session configuration.
func mustConfig(b *testing.B, edit func(*config.Config)) config.Config {
	cfg, _ := perfConfig(b, -1, func(c *config.Config) {
		c.KernelMode = config.Session
		if edit != nil {
			edit(c)
		}
	})
	return cfg
}

// clusterSessions is how many sessions the held-sessions benchmark runs
// at once, and clusterCellsEach how many cells each runs.
const (
	clusterSessions  = 24
	clusterCellsEach = 20
)

// BenchmarkClusterSessionsOneVersusThreeNodes: 24 sessions, each running
// 20 cells of five helper calls at once, over one kernel node and over
// three, in one run: cells/s of each and their ratio. On one machine the
// nodes share its cores, so this measures what spreading costs or buys
// there, not what three machines would give.
func BenchmarkClusterSessionsOneVersusThreeNodes(b *testing.B) {
	root := b.TempDir()
	writeTree(b, root, smallFile)
	one := newClusterBench(b, root, 1, nil)
	three := newClusterBench(b, root, 3, nil)
	const script = "for _ in range(5):\n    read('small.txt')\nx = 1"
	run := func(cb *clusterBench, tag string) float64 {
		owners := make([]*executecode.Owner, clusterSessions)
		for i := range owners {
			owners[i] = attachBench(b, cb.rt, fmt.Sprintf("%s-%d", tag, i))
			cellOn(b, cb.rt, owners[i], "x = 0")
		}
		t0 := time.Now()
		var wg sync.WaitGroup
		for _, o := range owners {
			wg.Go(func() {
				for range clusterCellsEach {
					cellOn(b, cb.rt, o, script)
				}
			})
		}
		wg.Wait()
		return float64(clusterSessions*clusterCellsEach) / time.Since(t0).Seconds()
	}
	round := 0
	for b.Loop() {
		round++
		c1 := run(one, fmt.Sprintf("one%d", round))
		c3 := run(three, fmt.Sprintf("three%d", round))
		b.ReportMetric(c1, "one-node-cells/s")
		b.ReportMetric(c3, "three-nodes-cells/s")
		b.ReportMetric(c3/c1, "three/one-ratio")
	}
}

// BenchmarkClusterNodeLossToFailure: the time from a kernel node's
// SIGKILL to the failure (killed_by node_lost) of a cell running on it.
func BenchmarkClusterNodeLossToFailure(b *testing.B) {
	root := b.TempDir()
	cb := newClusterBench(b, root, 0, nil)
	round := 0
	for b.Loop() {
		round++
		node, tmp := cb.startNode("node" + strconv.Itoa(round))
		cb.waitNodes(1)
		o := attachBench(b, cb.rt, fmt.Sprintf("loss%d", round))
		cellOn(b, cb.rt, o, "x = 1")
		notified := make(chan struct{}, 1)
		type answer struct {
			res executecode.Result
			at  time.Time
		}
		done := make(chan answer, 1)
		go func() {
			res, err := cb.rt.Execute(context.Background(), executecode.Call{
				Script: "import time\nnotify('go')\ntime.sleep(60)", Owner: o, TimeoutMS: 120000,
				Notify: func(string) {
					select {
					case notified <- struct{}{}:
					default:
					}
				}})
			if err != nil {
				res.Details = &executecode.Details{}
			}
			done <- answer{res, time.Now()}
		}()
		<-notified
		killed := time.Now()
		require.NoError(b, node.Process.Signal(syscall.SIGKILL))
		a := <-done
		require.Equal(b, executecode.KilledByNodeLost, a.res.Details.KilledBy, a.res.Text())
		b.ReportMetric(ms(a.at.Sub(killed)), "kill-to-failure-ms")
		cb.waitNodes(0)
		// The killed node's guard removes what it left.
		deadline := time.Now().Add(15 * time.Second)
		for {
			left, err := os.ReadDir(tmp)
			require.NoError(b, err)
			if len(left) == 0 {
				break
			}
			require.True(b, time.Now().Before(deadline), "the killed node's staging is still there: %v", left)
			time.Sleep(20 * time.Millisecond)
		}
	}
}

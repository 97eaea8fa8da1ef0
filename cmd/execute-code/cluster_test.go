package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/internal/proctest"
)

// The cluster's multi-process tests (docs/cluster.md): a session node
// (serve --cluster) and kernel nodes (node --join), each a separate
// process of the real binary on 127.0.0.1, over mutual TLS with
// development certificates.

// clusterCerts writes a development CA and certificates for names.
func clusterCerts(t *testing.T, names ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "certs")
	r := cli(t, "", nil, "node", "certs", dir, "--names", strings.Join(names, ","))
	require.Equal(t, 0, r.code, r.stderr)
	return dir
}

func tlsFlags(certDir, name string) []string {
	return []string{"--ca", filepath.Join(certDir, "ca.pem"), "--cert", filepath.Join(certDir, name+".pem"),
		"--key", filepath.Join(certDir, name+"-key.pem")}
}

// clusterProc is one node process; its lines of output arrive on lines.
type clusterProc struct {
	cmd   *exec.Cmd
	lines chan string
	done  chan struct{}
}

// sessionNode is serve --cluster: its JSON lines, answers by id.
type sessionNode struct {
	*serveProc
	proc    *clusterProc
	addr    string
	metrics string
	answers map[float64]map[string]any

	mu     sync.Mutex
	stderr []string
}

// logged says whether serve wrote a line to stderr containing s.
func (s *sessionNode) logged(sub string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.stderr {
		if strings.Contains(l, sub) {
			return true
		}
	}
	return false
}

// startSessionNode starts serve --cluster with the session certificate and
// waits for the address it listens on.
func startSessionNode(t *testing.T, certDir, mark string, extra ...string) *sessionNode {
	t.Helper()
	return startSessionNodeAs(t, certDir, "session", mark, extra...)
}

// startSessionNodeAs is startSessionNode with the certificate of name.
func startSessionNodeAs(t *testing.T, certDir, name, mark string, extra ...string) *sessionNode {
	t.Helper()
	args := append([]string{"--cluster", "--listen", "127.0.0.1:0", "--local-capacity", "0"}, tlsFlags(certDir, name)...)
	p, stderr := launchServe(t, t.TempDir(), []string{markEnv + "=" + mark}, true, append(args, extra...)...)
	addrs := make(chan string, 1)
	metrics := make(chan string, 1)
	s := &sessionNode{serveProc: p, answers: map[float64]map[string]any{}}
	go func() {
		// Drained to the end: serve must never block on its stderr.
		sent := false
		for {
			line, err := stderr.ReadString('\n')
			if _, url, ok := strings.Cut(line, "metrics at "); ok {
				metrics <- strings.TrimSpace(url)
			}
			if len(line) > 0 {
				s.mu.Lock()
				if len(s.stderr) < 10000 {
					s.stderr = append(s.stderr, line)
				}
				s.mu.Unlock()
			}
			if !sent {
				if _, addr, ok := strings.Cut(line, "listening on "); ok {
					addrs <- strings.TrimSpace(addr)
					sent = true
				}
			}
			if err != nil {
				if !sent {
					close(addrs)
				}
				return
			}
		}
	}()
	select {
	case addr, ok := <-addrs:
		require.True(t, ok, "serve --cluster ended before it listened")
		s.addr = addr
	case <-time.After(30 * time.Second):
		t.Fatal("serve --cluster did not say where it listens")
	}
	if slices.Contains(extra, "--metrics-addr") {
		select {
		case s.metrics = <-metrics:
		case <-time.After(30 * time.Second):
			t.Fatal("serve --cluster did not say where its metrics are")
		}
	}
	return s
}

// answerTo waits for the answer with id, keeping the others it reads.
func (s *sessionNode) answerTo(id float64) map[string]any {
	s.t.Helper()
	for {
		if a, ok := s.answers[id]; ok {
			delete(s.answers, id)
			return a
		}
		a := s.answer()
		got, _ := a["id"].(float64)
		s.answers[got] = a
	}
}

// startKernelNode starts node --join with name's certificate and a root
// holding whoami.txt (its name), and waits until it listens.
func startKernelNode(t *testing.T, certDir, name, join, mark string, capacity int, env ...string) *clusterProc {
	t.Helper()
	return startKernelNodeWith(t, certDir, name, mark, capacity, []string{"--join", join}, env...)
}

// startKernelNodeWith is startKernelNode with flags of the caller's
// instead of --join.
func startKernelNodeWith(t *testing.T, certDir, name, mark string, capacity int, flags []string, env ...string) *clusterProc {
	t.Helper()
	root := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(root, "whoami.txt"), []byte(name), 0o644))
	args := append(append([]string{"node", "--listen", "127.0.0.1:0", "--root", root,
		"--capacity", fmt.Sprint(capacity)}, flags...), tlsFlags(certDir, name)...)
	cmd := exec.Command(binary, args...)
	cmd.Env = append(append(os.Environ(), "TMPDIR="+t.TempDir(), markEnv+"="+mark), env...)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = cmd.Stdout
	require.NoError(t, cmd.Start())
	p := &clusterProc{cmd: cmd, lines: make(chan string, 100), done: make(chan struct{})}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case p.lines <- sc.Text():
			default: // a chatty node's logs are not the test's concern
			}
		}
	}()
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.stop(t) })
	for {
		select {
		case line, ok := <-p.lines:
			require.True(t, ok, "node %s ended before it listened", name)
			if strings.Contains(line, "listening on") {
				return p
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("node %s did not say it listens", name)
		}
	}
}

// stop ends the node as an operator would (SIGTERM), or finds it ended.
func (p *clusterProc) stop(t *testing.T) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Error("node did not exit on SIGTERM")
	}
}

// waitNodes waits until the session node's snapshot lists n kernel nodes.
func (s *sessionNode) waitNodes(n int, id *float64) []any {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		*id++
		s.send(fmt.Sprintf(`{"id":%v,"op":"snapshot"}`, *id))
		snap := s.answerTo(*id)["snapshot"].(map[string]any)
		nodes, _ := snap["nodes"].([]any)
		remote := 0
		for _, nd := range nodes {
			if local, _ := nd.(map[string]any)["local"].(bool); !local {
				remote++
			}
		}
		if remote == n {
			return nodes
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the session node sees %d kernel nodes, want %d: %v", remote, n, snap["nodes"])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func resultOf(t *testing.T, a map[string]any) (blocks []any, details map[string]any) {
	t.Helper()
	res, ok := a["result"].(map[string]any)
	require.True(t, ok, "not a result: %v", a)
	b, _ := res["blocks"].([]any)
	d, _ := res["details"].(map[string]any)
	return b, d
}

func execLine(id float64, session, script string) string {
	b, _ := json.Marshal(script)
	return fmt.Sprintf(`{"id":%v,"op":"execute","session":%q,"script":%s,"timeout_ms":60000}`, id, session, b)
}

// Thirty sessions spread over three kernel nodes keep their state there,
// while every helper call runs on the session side; a node killed with
// SIGKILL fails its sessions' in-flight cells at once with node_lost,
// leaves the other sessions untouched, and its sessions' next cells run
// on a live node with fresh state.
func TestClusterSpreadsSessionsAndSurvivesANodeKill(t *testing.T) {
	mark := newMark()
	killMarked(t, mark)
	certDir := clusterCerts(t, "session", "node1", "node2", "node3")
	s := startSessionNode(t, certDir, mark, "--liveness-interval-ms", "200", "--liveness-timeout-ms", "1000",
		"--metrics-addr", "127.0.0.1:0")
	nodes := map[string]*clusterProc{}
	for _, name := range []string{"node1", "node2", "node3"} {
		nodes[name] = startKernelNode(t, certDir, name, s.addr, mark, 12)
	}
	id := 0.0
	s.waitNodes(3, &id)

	// A file on the session side's root only: helper calls run there.
	sessionRoot := s.cmd.Args[3]
	require.NoError(t, os.WriteFile(filepath.Join(sessionRoot, "shared.txt"), []byte("from the session side"), 0o644))

	const sessions = 30
	where := map[string]string{}
	perNode := map[string]int{}
	for i := range sessions {
		sess := fmt.Sprintf("s%d", i)
		blocks, details := s.attachRun(&id, sess, fmt.Sprintf("x = %d\ntext(open('whoami.txt').read())\ntext(read('shared.txt'))", i))
		require.Len(t, blocks, 2, "%v", details)
		where[sess] = blocks[0].(string)
		perNode[where[sess]]++
		assert.Contains(t, blocks[1], "from the session side")
		assert.Equal(t, 1.0, details["rpc_calls"], "the helper call is counted on the session side")
	}
	require.Len(t, perNode, 3, "every node holds sessions: %v", perNode)
	for name, n := range perNode {
		assert.LessOrEqual(t, n, 12, "node %s over its capacity", name)
	}
	nodes2 := s.waitNodes(3, &id)
	total := 0
	for _, nd := range nodes2 {
		total += int(nd.(map[string]any)["kernels"].(float64))
	}
	assert.Equal(t, sessions, total, "the snapshot counts every live kernel on its node: %v", nodes2)
	assert.NotContains(t, mustJSON(t, nodes2), "127.0.0.1", "the snapshot names no node")

	// The operator's metrics give each node's figures by its address.
	resp, err := http.Get(s.metrics)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	perNodeMetric := 0
	for _, line := range strings.Split(string(body), "\n") {
		if rest, ok := strings.CutPrefix(line, `execute_code_cluster_node_kernels{node="127.0.0.1:`); ok {
			n, err := strconv.Atoi(strings.Fields(rest)[1])
			require.NoError(t, err, line)
			perNodeMetric += n
		}
	}
	assert.Equal(t, sessions, perNodeMetric, "per-node kernels in the metrics")

	// A long cell on a session of node1, and node1 killed under it; then
	// the same on node2, frozen (SIGSTOP) instead.
	pick := func(node string) string {
		for sess, n := range where {
			if n == node {
				return sess
			}
		}
		t.Fatalf("no session on %s", node)
		return ""
	}
	victim, frozen, bystander := pick("node1"), pick("node2"), pick("node3")
	lose := func(sess string, node *clusterProc, sig syscall.Signal) time.Duration {
		longID := s.startLong(&id, sess)
		at := time.Now()
		require.NoError(t, node.cmd.Process.Signal(sig))
		a := s.answerTo(longID)
		after := time.Since(at)
		_, details := resultOf(t, a)
		assert.Equal(t, "node_lost", details["killed_by"], "%v", a)
		assert.Equal(t, false, details["state_retained"], "%v", a)
		return after
	}
	killedAfter := lose(victim, nodes["node1"], syscall.SIGKILL)
	t.Logf("in-flight cell failed %v after its node's SIGKILL", killedAfter)
	assert.Less(t, killedAfter, 20*time.Second, "the cell failed at its timeout, not at the node's loss")
	frozenAfter := lose(frozen, nodes["node2"], syscall.SIGSTOP)
	t.Logf("in-flight cell failed %v after its node's SIGSTOP (liveness timeout 1 s)", frozenAfter)
	// The liveness bound (1 s here) plus slack for a loaded machine, and
	// well under gRPC keepalive's 10 s floor: the property is that a
	// frozen node is seen gone by the liveness check.
	assert.Less(t, frozenAfter, 8*time.Second, "the frozen node was not seen gone within its liveness bound")
	t.Cleanup(func() { _ = nodes["node2"].cmd.Process.Signal(syscall.SIGCONT) })

	// A session elsewhere kept its kernel and state.
	id++
	s.send(execLine(id, bystander, "text(str(x))"))
	blocks, details := resultOf(t, s.answerTo(id))
	assert.Equal(t, true, details["kernel_reused"], "%v", details)
	require.Len(t, blocks, 1, "%v", details)

	// The victim's next cell runs on a live node, with fresh state.
	id++
	s.send(execLine(id, victim, "text(open('whoami.txt').read())\ntext(str('x' in globals()))"))
	blocks, details = resultOf(t, s.answerTo(id))
	require.Len(t, blocks, 2, "%v", details)
	assert.Equal(t, "node3", blocks[0], "the only live node")
	assert.Equal(t, "False", blocks[1], "nothing of the lost kernel was replayed")
	s.waitNodes(1, &id)
}

// A session node killed with SIGKILL leaves no interpreter on its kernel
// nodes: each kernel watches its owner and ends with it.
func TestClusterKernelNodesReapTheKernelsOfALostSessionNode(t *testing.T) {
	mark, nodeMark := newMark(), newMark()
	t.Cleanup(func() {
		for _, m := range []string{mark, nodeMark} {
			for _, pid := range proctest.Marked(markEnv, m) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	certDir := clusterCerts(t, "session", "node1")
	s := startSessionNode(t, certDir, mark)
	// No interpreter kept warm: every python3 of the node but its guard
	// is then a kernel's.
	node := startKernelNode(t, certDir, "node1", s.addr, nodeMark, 4, "EXECUTE_CODE_WARM_INTERPRETERS=0")
	id := 0.0
	s.waitNodes(1, &id)
	for i := range 3 {
		_, details := s.attachRun(&id, fmt.Sprintf("s%d", i), "x = 1")
		require.Equal(t, true, details["state_retained"], "%v", details)
	}
	nodePid := node.cmd.Process.Pid
	interpreters := func() []int {
		var out []int
		for _, pid := range proctest.Marked(markEnv, nodeMark) {
			cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			if pid != nodePid && !bytes.HasPrefix(cmdline, []byte("execute-code-guard\x00")) {
				out = append(out, pid)
			}
		}
		return out
	}
	require.NotEmpty(t, interpreters(), "the node runs the kernels")

	require.NoError(t, s.cmd.Process.Signal(syscall.SIGKILL))
	deadline := time.Now().Add(30 * time.Second)
	for len(interpreters()) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("interpreters left on the node after its session node died: %v", interpreters())
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case <-node.done:
		t.Fatal("the kernel node ended with its session node; it should wait for the next one")
	default:
	}
}

// A node refuses to start on a cluster setting it cannot honour, and
// names the problem.
func TestClusterNodeRefusesBadSettings(t *testing.T) {
	certDir := clusterCerts(t, "session", "node1")
	other := clusterCerts(t, "node1")
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no join", append([]string{"node"}, tlsFlags(certDir, "node1")...), "join"},
		{"no certificates", []string{"node", "--join", "127.0.0.1:7300"}, "mutual TLS"},
		{"bad join", append([]string{"node", "--join", "nowhere"}, tlsFlags(certDir, "node1")...), "host:port"},
		{"capacity 0", append([]string{"node", "--join", "127.0.0.1:7300", "--capacity", "0"}, tlsFlags(certDir, "node1")...), "--capacity"},
		{"key of another CA", []string{"node", "--join", "127.0.0.1:7300", "--ca", filepath.Join(certDir, "ca.pem"),
			"--cert", filepath.Join(certDir, "node1.pem"), "--key", filepath.Join(other, "node1-key.pem")}, "key"},
		{"cluster flag without --cluster", []string{"serve", "--listen", "127.0.0.1:0"}, "--cluster"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := cli(t, "", nil, tc.args...)
			assert.Equal(t, exitUsage, r.code, r.stdout+r.stderr)
			assert.Contains(t, r.stderr, tc.want)
		})
	}
}

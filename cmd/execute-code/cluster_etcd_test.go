package main

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/config"
	"github.com/executecode/executecode/internal/cluster/certs"
	"github.com/executecode/executecode/internal/cluster/membership/etcdtest"
	"github.com/executecode/executecode/internal/proctest"
)

// The etcd membership end to end (docs/cluster.md, Membership): session
// nodes (serve --cluster --etcd) and kernel nodes (node --etcd, no
// --join), each a process of the real binary, and an etcd of the test's,
// all on 127.0.0.1.

// attachRun attaches session on s and runs script in it.
func (s *sessionNode) attachRun(id *float64, session, script string) ([]any, map[string]any) {
	s.t.Helper()
	*id++
	s.send(fmt.Sprintf(`{"id":%v,"op":"attach","session":%q,"agent":"a"}`, *id, session))
	require.Equal(s.t, true, s.answerTo(*id)["ok"])
	return s.run(id, session, script)
}

// run runs script in session on s.
func (s *sessionNode) run(id *float64, session, script string) ([]any, map[string]any) {
	s.t.Helper()
	*id++
	s.send(execLine(*id, session, script))
	return resultOf(s.t, s.answerTo(*id))
}

// startLong starts a cell that notifies and then sleeps, and returns its
// id once the notification arrived (the cell runs on its kernel).
func (s *sessionNode) startLong(id *float64, session string) float64 {
	s.t.Helper()
	*id++
	long := *id
	s.send(execLine(long, session, "import time\nnotify('running')\ntime.sleep(50)\ntext('never')"))
	for {
		m := <-s.lines
		if _, note := m["notify"]; note {
			return long
		}
		got, _ := m["id"].(float64)
		s.answers[got] = m
	}
}

func killMarked(t *testing.T, marks ...string) {
	t.Cleanup(func() {
		var left []int
		for _, m := range marks {
			left = append(left, proctest.Marked(markEnv, m)...)
		}
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		assert.Empty(t, left, "processes of the cluster outlived the test")
	})
}

// Two session nodes and two kernel nodes that know each other only
// through etcd: both session nodes see both kernel nodes and run sessions
// on them, each node's capacity is its own to refuse, a node killed
// leaves both session nodes with its sessions failed node_lost, a node
// started later is found, and etcd's death leaves running sessions
// alone. Garbage and a member nobody runs under the prefix harm nothing.
func TestClusterEtcdSessionNodesShareKernelNodes(t *testing.T) {
	mark := newMark()
	killMarked(t, mark)
	etcd := etcdtest.Start(t, nil)
	client := etcd.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for key, value := range map[string]string{
		"garbage":     "not json {",
		"127.0.0.1:2": strings.Repeat("x", 4000),
		// Well formed, but no node runs there: admitted, seen gone at
		// once, and watched again now and then.
		"127.0.0.1:1": `{"address":"127.0.0.1:1","incarnation":"phantom","capacity":4}`,
	} {
		_, err := client.Put(ctx, config.DefaultEtcdPrefix+key, value)
		require.NoError(t, err)
	}

	certDir := clusterCerts(t, "session1", "session2", "node1", "node2", "node3")
	flags := []string{"--etcd", etcd.Addr(), "--etcd-ttl-ms", "1000", "--liveness-interval-ms", "200", "--liveness-timeout-ms", "1000"}
	a := startSessionNodeAs(t, certDir, "session1", mark, flags...)
	b := startSessionNodeAs(t, certDir, "session2", mark, flags...)
	nodes := map[string]*clusterProc{}
	for _, name := range []string{"node1", "node2"} {
		nodes[name] = startKernelNodeWith(t, certDir, name, mark, 4, flags)
	}
	var ida, idb float64
	a.waitNodes(2, &ida)
	b.waitNodes(2, &idb)

	// Each side places by what it knows, its own kernels, and ties go to
	// the lower address; each node refuses past its capacity (4). a runs
	// five sessions (3 on the lower node, 2 on the other), b two (1 and
	// 1): b's third goes to the lower node, which is full, and is
	// refused there and started on the other; its fourth finds both full.
	where := map[*sessionNode]map[string]string{a: {}, b: {}}
	ids := map[*sessionNode]*float64{a: &ida, b: &idb}
	place := func(s *sessionNode, n int) map[string]int {
		perNode := map[string]int{}
		for range n {
			sess := fmt.Sprintf("s%d", len(where[s]))
			blocks, details := s.attachRun(ids[s], sess, fmt.Sprintf("x = %d\ntext(open('whoami.txt').read())", len(where[s])))
			require.Len(t, blocks, 1, "%v", details)
			where[s][sess] = blocks[0].(string)
			perNode[blocks[0].(string)]++
		}
		return perNode
	}
	pa := place(a, 5)
	require.Len(t, pa, 2, "a spreads its sessions: %v", pa)
	full := "node1"
	if pa["node2"] == 3 {
		full = "node2"
	}
	require.Equal(t, 3, pa[full], "%v", pa)
	assert.Equal(t, map[string]int{"node1": 1, "node2": 1}, place(b, 2), "b spreads its own")
	other := map[string]string{"node1": "node2", "node2": "node1"}[full]
	assert.Equal(t, map[string]int{other: 1}, place(b, 1), "refused by the full node, started on the other")

	// Both nodes are full: the next start is refused by each, and the
	// call says the capacity is exhausted (it runs isolated).
	blocks, details := b.attachRun(&idb, "extra", "text('ran')")
	assert.Equal(t, "capacity_exhausted", details["fallback_reason"], "%v", details)
	assert.Equal(t, []any{"ran"}, blocks)

	// node1 killed under a running cell of each side.
	on := func(s *sessionNode, node string) string {
		for sess, n := range where[s] {
			if n == node {
				return sess
			}
		}
		t.Fatalf("no session on %s", node)
		return ""
	}
	victimA, victimB := on(a, "node1"), on(b, "node1")
	longA, longB := a.startLong(&ida, victimA), b.startLong(&idb, victimB)
	killed := time.Now()
	require.NoError(t, nodes["node1"].cmd.Process.Signal(syscall.SIGKILL))
	for s, long := range map[*sessionNode]float64{a: longA, b: longB} {
		_, details := resultOf(t, s.answerTo(long))
		assert.Equal(t, "node_lost", details["killed_by"], "%v", details)
		assert.Equal(t, false, details["state_retained"], "%v", details)
	}
	lostAfter := time.Since(killed)
	a.waitNodes(1, &ida)
	b.waitNodes(1, &idb)
	t.Logf("node SIGKILLed: both sides' cells failed node_lost within %v, both snapshots without it within %v", lostAfter, time.Since(killed))

	// A kernel node started after the session nodes is found by both,
	// and the victims' next cells run there with fresh state.
	nodes["node3"] = startKernelNodeWith(t, certDir, "node3", mark, 4, flags)
	registered := time.Now()
	a.waitNodes(2, &ida)
	b.waitNodes(2, &idb)
	t.Logf("a node registered after the session nodes: in both snapshots %v after it said it listens", time.Since(registered))
	for s, victim := range map[*sessionNode]string{a: victimA, b: victimB} {
		blocks, details := s.run(ids[s], victim, "text(open('whoami.txt').read())\ntext(str('x' in globals()))")
		assert.Equal(t, []any{"node3", "False"}, blocks, "%v", details)
	}

	// etcd gone: the running sessions keep their kernels and state, new
	// ones are placed on the nodes known, and the loss is only logged.
	etcd.Kill()
	for _, s := range []*sessionNode{a, b} {
		s := s
		require.Eventually(t, func() bool { return s.logged("membership unreachable") }, 30*time.Second, 50*time.Millisecond,
			"the session node logs that etcd is gone")
		sess := on(s, "node2")
		blocks, details := s.run(ids[s], sess, "text(open('whoami.txt').read())\ntext(str(x))")
		require.Len(t, blocks, 2, "%v", details)
		assert.Equal(t, "node2", blocks[0])
		assert.Equal(t, true, details["kernel_reused"], "%v", details)
		blocks, details = s.attachRun(ids[s], "after-etcd", "text(open('whoami.txt').read())")
		assert.Equal(t, []any{"node3"}, blocks, "%v", details)
		s.waitNodes(2, ids[s])
	}
	for name, n := range map[string]*clusterProc{"node2": nodes["node2"], "node3": nodes["node3"]} {
		select {
		case <-n.done:
			t.Fatalf("kernel node %s ended when etcd did", name)
		default:
		}
	}
}

// A kernel node that cannot register in etcd does not start, and says
// why; bad etcd settings are refused with the flag named.
func TestClusterEtcdSettingsAreRefusedClearly(t *testing.T) {
	certDir := clusterCerts(t, "node1")
	tls := tlsFlags(certDir, "node1")
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"a URL", append([]string{"node", "--etcd", "http://127.0.0.1:2379"}, tls...), "--etcd: item 1"},
		{"no port", append([]string{"node", "--etcd", "127.0.0.1:2379,etcd2"}, tls...), "--etcd: item 2"},
		{"empty item", append([]string{"node", "--etcd", "127.0.0.1:2379,"}, tls...), "--etcd: item 2"},
		{"ttl not seconds", append([]string{"node", "--etcd", "127.0.0.1:2379", "--etcd-ttl-ms", "1500"}, tls...), "whole seconds"},
		{"ttl too short", append([]string{"node", "--etcd", "127.0.0.1:2379", "--etcd-ttl-ms", "10"}, tls...), "--etcd-ttl-ms"},
		{"bad prefix", append([]string{"node", "--etcd", "127.0.0.1:2379", "--etcd-prefix", "nodes"}, tls...), "--etcd-prefix"},
		{"half of etcd's TLS", append([]string{"node", "--etcd", "127.0.0.1:2379", "--etcd-ca", "ca.pem"}, tls...), "go together"},
		{"etcd TLS without etcd", append([]string{"node", "--join", "127.0.0.1:7300", "--etcd-ca", "a", "--etcd-cert", "b", "--etcd-key", "c"}, tls...), "etcd_endpoints"},
		{"missing etcd certificates", append([]string{"node", "--etcd", "127.0.0.1:2379", "--etcd-ca", filepath.Join(certDir, "none.pem"),
			"--etcd-cert", filepath.Join(certDir, "node1.pem"), "--etcd-key", filepath.Join(certDir, "node1-key.pem")}, tls...), "etcd certificates"},
		{"etcd flag without --cluster", []string{"serve", "--etcd", "127.0.0.1:2379"}, "--cluster"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := cli(t, "", nil, tc.args...)
			assert.Equal(t, exitUsage, r.code, r.stdout+r.stderr)
			assert.Contains(t, r.stderr, tc.want)
		})
	}

	// Nothing listens at the endpoint: the node refuses to run rather
	// than run unregistered.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := l.Addr().String()
	require.NoError(t, l.Close())
	r := cli(t, "", nil, append([]string{"node", "--etcd", dead, "--listen", "127.0.0.1:0"}, tls...)...)
	assert.Equal(t, exitFailed, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stderr, "register this node")
	assert.Contains(t, r.stderr, dead)
}

// etcd over TLS with client certificates: nodes with a certificate of
// etcd's CA register and find each other; a node that speaks plain HTTP
// to it, or holds a certificate of another CA, cannot register and does
// not start.
func TestClusterEtcdOverTLS(t *testing.T) {
	mark := newMark()
	killMarked(t, mark)
	certDir := clusterCerts(t, "etcd", "session", "node1", "node2")
	pem := func(name string) string { return filepath.Join(certDir, name) }
	own, err := certs.Load(pem("ca.pem"), pem("etcd.pem"), pem("etcd-key.pem"), time.Now())
	require.NoError(t, err)
	etcd := etcdtest.Start(t, &etcdtest.TLS{CA: pem("ca.pem"), Cert: pem("etcd.pem"), Key: pem("etcd-key.pem"), Client: own.Client})
	etcdTLS := func(name string) []string {
		return []string{"--etcd", etcd.Addr(), "--etcd-ca", pem("ca.pem"), "--etcd-cert", pem(name + ".pem"), "--etcd-key", pem(name + "-key.pem")}
	}

	s := startSessionNode(t, certDir, mark, etcdTLS("session")...)
	startKernelNodeWith(t, certDir, "node1", mark, 2, etcdTLS("node1"))
	var id float64
	s.waitNodes(1, &id)
	blocks, details := s.attachRun(&id, "s", "text(open('whoami.txt').read())")
	assert.Equal(t, []any{"node1"}, blocks, "%v", details)

	other := clusterCerts(t, "node2")
	otherTLS := []string{"--etcd-cert", filepath.Join(other, "node2.pem"), "--etcd-key", filepath.Join(other, "node2-key.pem")}
	for _, tc := range []struct {
		name  string
		flags []string
		code  int
		want  string
	}{
		{"plain HTTP", []string{"--etcd", etcd.Addr()}, exitFailed, "register this node"},
		// Both ends refuse: etcd the client's certificate, the client
		// etcd's.
		{"another CA", append([]string{"--etcd", etcd.Addr(), "--etcd-ca", filepath.Join(other, "ca.pem")}, otherTLS...), exitFailed, "register this node"},
		// Checked against the CA named before any dial.
		{"a certificate not of the CA", append([]string{"--etcd", etcd.Addr(), "--etcd-ca", pem("ca.pem")}, otherTLS...), exitUsage, "etcd certificates"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := cli(t, "", nil, append(append([]string{"node", "--listen", "127.0.0.1:0"}, tc.flags...), tlsFlags(certDir, "node2")...)...)
			assert.Equal(t, tc.code, r.code, r.stdout+r.stderr)
			assert.Contains(t, r.stderr, tc.want)
		})
	}
	s.waitNodes(1, &id)
}

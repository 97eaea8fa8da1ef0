package transport

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/executecode/executecode/internal/cluster/certs"
	"github.com/executecode/executecode/internal/cluster/wire"
)

// A test process runs at most one remote (two in one process race inside
// the library): a node under test is this test binary run again with
// nodeEnv naming its certificate directory.
const nodeEnv = "EXECUTE_CODE_TEST_TRANSPORT_NODE"

func TestMain(m *testing.M) {
	if dir := os.Getenv(nodeEnv); dir != "" {
		os.Exit(runNode(dir))
	}
	goleak.VerifyTestMain(m)
}

func newSystem() *actor.ActorSystem {
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }),
		actor.WithDeadLetterThrottleInterval(time.Millisecond))
}

// runNode is a node with a well-known "victim" actor that answers each
// Notify envelope with a Notify of how many it has seen; it prints its
// address and runs until its stdin closes.
func runNode(dir string) int {
	tc, err := certs.Load(filepath.Join(dir, "ca.pem"), filepath.Join(dir, "node1.pem"), filepath.Join(dir, "node1-key.pem"), time.Now())
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	sys := newSystem()
	tr, err := Start(sys, Config{TLS: tc, Keepalive: time.Second, KeepaliveTimeout: time.Second})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	var seen atomic.Int64
	_, err = sys.Root.SpawnNamed(actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(*wire.Envelope); ok {
			n := seen.Add(1)
			if env, err := wire.Encode(&wire.Notify{Message: fmt.Sprint(n)}, "k1", 0); err == nil {
				ctx.Respond(env)
			}
		}
	}), "victim")
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("address", tr.Address())
	_, _ = io.Copy(io.Discard, os.Stdin)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tr.Stop(ctx)
	return 0
}

type nodeProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	addr  string
}

func startNode(t *testing.T, dir string) *nodeProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), nodeEnv+"="+dir)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	n := &nodeProc{cmd: cmd, stdin: stdin}
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "address ")
	require.True(t, ok, "node said %q", line)
	n.addr = addr
	return n
}

func devCerts(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	_, err := certs.WriteDev(dir, []string{"session", "node1"}, time.Now())
	require.NoError(t, err)
	return dir
}

// client is this process's one remote, with the session certificate.
func client(t *testing.T, dir string) *actor.ActorSystem {
	t.Helper()
	tc, err := certs.Load(filepath.Join(dir, "ca.pem"), filepath.Join(dir, "session.pem"), filepath.Join(dir, "session-key.pem"), time.Now())
	require.NoError(t, err)
	sys := newSystem()
	tr, err := Start(sys, Config{TLS: tc, Keepalive: time.Second, KeepaliveTimeout: time.Second})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		tr.Stop(ctx)
		sys.Shutdown()
	})
	return sys
}

func ping(t *testing.T, sys *actor.ActorSystem, addr string) string {
	t.Helper()
	env, err := wire.Encode(&wire.Notify{Message: "ping"}, "k1", 0)
	require.NoError(t, err)
	res, err := sys.Root.RequestFuture(actor.NewPID(addr, "victim"), env, 10*time.Second).Result()
	require.NoError(t, err)
	v, err := wire.Decode(res.(*wire.Envelope))
	require.NoError(t, err)
	return v.(*wire.Notify).Message
}

// The whole attack surface of a node's port, against one node: the
// victim counts what reached it, and a valid peer is served after each
// attack.
func TestANodesPortServesOnlyPeersWithCertificatesOfItsCA(t *testing.T) {
	dir := devCerts(t)
	node := startNode(t, dir)
	sys := client(t, dir)
	start := time.Now()
	assert.Equal(t, "1", ping(t, sys, node.addr))
	t.Logf("first round trip (connect included): %s", time.Since(start))
	start = time.Now()
	assert.Equal(t, "2", ping(t, sys, node.addr))
	t.Logf("round trip: %s", time.Since(start))

	tc, err := certs.Load(filepath.Join(dir, "ca.pem"), filepath.Join(dir, "session.pem"), filepath.Join(dir, "session-key.pem"), time.Now())
	require.NoError(t, err)

	t.Run("a peer without a certificate is refused in the handshake", func(t *testing.T) {
		cfg := tc.Client.Clone()
		cfg.Certificates = nil
		assert.Error(t, tlsRead(node.addr, cfg))
	})
	t.Run("a peer with a certificate of another CA is refused", func(t *testing.T) {
		other := t.TempDir()
		_, err := certs.WriteDev(other, []string{"session"}, time.Now())
		require.NoError(t, err)
		otc, err := certs.Load(filepath.Join(other, "ca.pem"), filepath.Join(other, "session.pem"), filepath.Join(other, "session-key.pem"), time.Now())
		require.NoError(t, err)
		cfg := otc.Client.Clone()
		cfg.RootCAs = tc.Client.RootCAs // it trusts the node; the node does not trust it
		assert.Error(t, tlsRead(node.addr, cfg))
	})
	t.Run("garbage on the port harms nothing", func(t *testing.T) {
		junk := make([]byte, 64<<10)
		_, _ = rand.Read(junk)
		for _, b := range [][]byte{junk, []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), {0x16, 0x03, 0x01, 0xff, 0xff}, {0xff, 0xff, 0xff, 0xff}} {
			c, err := net.DialTimeout("tcp", node.addr, 5*time.Second)
			require.NoError(t, err)
			_, _ = c.Write(b)
			_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
			_, _ = c.Read(make([]byte, 512))
			c.Close()
		}
		// A half-open connection left idle.
		idle, err := net.DialTimeout("tcp", node.addr, 5*time.Second)
		require.NoError(t, err)
		defer idle.Close()
	})
	t.Run("a valid peer's message of a type no node sends closes its stream and harms nothing", func(t *testing.T) {
		for _, name := range []string{"google.protobuf.Struct", "remote.ActorPidRequest", "actor.Stop", "actor.PoisonPill", "no.such.Type"} {
			data, _ := proto.Marshal(&structpb.Struct{})
			err := sendBatch(t, node.addr, tc.Client, &remote.MessageBatch{
				TypeNames: []string{name}, Targets: []*actor.PID{actor.NewPID(node.addr, "victim")},
				Envelopes: []*remote.MessageEnvelope{{TypeId: 0, MessageData: data, Target: 0}},
			})
			require.Error(t, err, name)
			assert.Contains(t, err.Error(), "message refused", name)
		}
		for _, b := range []*remote.MessageBatch{
			{TypeNames: []string{"executecode.cluster.Envelope"}, Envelopes: []*remote.MessageEnvelope{{TypeId: 3}}},
			{TypeNames: []string{"executecode.cluster.Envelope"}, Targets: []*actor.PID{actor.NewPID(node.addr, "victim")},
				Envelopes: []*remote.MessageEnvelope{{TypeId: 0, Target: 0, Sender: 5}}},
			{TypeNames: []string{"actor.Watch"}, Targets: []*actor.PID{actor.NewPID(node.addr, "victim")},
				Envelopes: []*remote.MessageEnvelope{{TypeId: 0, Target: 0}}},
		} {
			err := sendBatch(t, node.addr, tc.Client, b)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "message refused")
		}
	})
	t.Run("a valid peer's unary calls, which the library answers with a panic, are refused", func(t *testing.T) {
		conn, err := grpc.Dial(node.addr, grpc.WithTransportCredentials(credentials.NewTLS(tc.Client)))
		require.NoError(t, err)
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c := remote.NewRemotingClient(conn)
		_, err = c.ListProcesses(ctx, &remote.ListProcessesRequest{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "no unary calls")
		_, err = c.GetProcessDiagnostics(ctx, &remote.GetProcessDiagnosticsRequest{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "no unary calls")
	})
	t.Run("a valid peer still gets through", func(t *testing.T) {
		assert.Equal(t, "3", ping(t, sys, node.addr), "no attack reached the victim")
	})
}

// tlsRead dials with cfg and reads: a refused client certificate shows
// on the first read in TLS 1.3.
func tlsRead(addr string, cfg *tls.Config) error {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := c.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")); err != nil {
		return err
	}
	_, err = c.Read(make([]byte, 64))
	return err
}

// sendBatch speaks the remote's own gRPC protocol with a valid
// certificate: connect, then one batch, and returns how the stream ended.
func sendBatch(t *testing.T, addr string, cfg *tls.Config, b *remote.MessageBatch) error {
	t.Helper()
	conn, err := grpc.Dial(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	require.NoError(t, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := remote.NewRemotingClient(conn).Receive(ctx)
	require.NoError(t, err)
	require.NoError(t, stream.Send(&remote.RemoteMessage{MessageType: &remote.RemoteMessage_ConnectRequest{
		ConnectRequest: &remote.ConnectRequest{ConnectionType: &remote.ConnectRequest_ServerConnection{
			ServerConnection: &remote.ServerConnection{SystemId: "attacker", Address: "127.0.0.1:1"}}}}}))
	if _, err := stream.Recv(); err != nil {
		return err
	}
	if err := stream.Send(&remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: b}}); err != nil {
		return err
	}
	for {
		if _, err := stream.Recv(); err != nil {
			return err
		}
	}
}

func TestStartRefusesWhatItCannotServe(t *testing.T) {
	sys := newSystem()
	defer sys.Shutdown()
	_, err := Start(sys, Config{})
	require.ErrorIs(t, err, ErrInvalidConfig)
	assert.Contains(t, err.Error(), "mutual TLS")

	dir := devCerts(t)
	tc, err := certs.Load(filepath.Join(dir, "ca.pem"), filepath.Join(dir, "node1.pem"), filepath.Join(dir, "node1-key.pem"), time.Now())
	require.NoError(t, err)
	for _, bad := range []string{"nohost", ":80", "127.0.0.1:99999", "127.0.0.1:x"} {
		_, err := Start(sys, Config{Listen: bad, TLS: tc})
		require.ErrorIs(t, err, ErrInvalidConfig, bad)
		assert.Contains(t, err.Error(), bad)
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	_, err = Start(sys, Config{Listen: taken.Addr().String(), TLS: tc})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "address already in use")
}

// A message far over gRPC's default 4 MiB reaches the node, and a frozen
// node is seen gone by a watcher within its keepalive bound.
func TestABigMessageArrivesAndAFrozenNodeIsSeenGone(t *testing.T) {
	dir := devCerts(t)
	node := startNode(t, dir)
	sys := client(t, dir)
	victim := actor.NewPID(node.addr, "victim")

	env, err := wire.Encode(&wire.Notify{Message: strings.Repeat("x", 10<<20)}, "k1", 0)
	require.NoError(t, err)
	res, err := sys.Root.RequestFuture(victim, env, 30*time.Second).Result()
	require.NoError(t, err)
	v, err := wire.Decode(res.(*wire.Envelope))
	require.NoError(t, err)
	assert.Equal(t, "1", v.(*wire.Notify).Message)

	gone := make(chan *actor.Terminated, 1)
	watcher := sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *actor.Started:
			ctx.Watch(victim)
		case *actor.Terminated:
			gone <- m
		}
	}))
	defer sys.Root.Stop(watcher)
	// The watch must have reached the node before it freezes.
	assert.Equal(t, "2", ping(t, sys, node.addr))
	select {
	case m := <-gone:
		t.Fatalf("a healthy node was reported gone: %v", m)
	case <-time.After(500 * time.Millisecond):
	}

	require.NoError(t, node.cmd.Process.Signal(syscall.SIGSTOP))
	frozen := time.Now()
	defer func() { _ = node.cmd.Process.Kill() }()
	select {
	case m := <-gone:
		assert.Equal(t, actor.TerminatedReason_AddressTerminated, m.Why)
		t.Logf("frozen node seen gone after %s (keepalive 1 s, timeout 1 s)", time.Since(frozen))
	case <-time.After(15 * time.Second):
		t.Fatal("a frozen node was never seen gone")
	}
}

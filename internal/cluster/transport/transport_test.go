package transport

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/executecode/executecode/internal/cluster/certs"
	"github.com/executecode/executecode/internal/cluster/wire"
)

// A test process starts at most one remote in its life: the library's
// start writes gRPC's global logger, which every gRPC goroutine of an
// earlier remote may have read. So this process has one client remote,
// shared by the tests; a node under test is this test binary run again
// with nodeEnv naming the certificate directory, and a session whose
// stop is tested is one run with sessionEnv.
const (
	nodeEnv    = "EXECUTE_CODE_TEST_TRANSPORT_NODE"
	sessionEnv = "EXECUTE_CODE_TEST_TRANSPORT_SESSION"
	certsEnv   = "EXECUTE_CODE_TEST_TRANSPORT_CERTS"
)

// The liveness bound every node of these tests runs with; gRPC's
// keepalive alone sees a frozen node gone after max(keepalive, 10 s) plus
// its timeout.
const (
	testInterval = 500 * time.Millisecond
	testTimeout  = 2 * time.Second
)

// timeoutEnv gives a node or session process another liveness timeout:
// the tests that move hundreds of MiB, which on a loaded machine under
// the race detector can starve a process for seconds, are about what
// the library's connection does, not about the liveness bound.
const timeoutEnv = "EXECUTE_CODE_TEST_TRANSPORT_TIMEOUT"

// testConfig keeps gRPC's default keepalive (10 s, 3 s): a keepalive
// answer due within 1 s is what a loaded machine misses first, and what
// the tests show is the liveness check's doing.
func testConfig(tc *certs.TLS) Config {
	cfg := Config{TLS: tc, LivenessInterval: testInterval, LivenessTimeout: testTimeout}
	if d, err := time.ParseDuration(os.Getenv(timeoutEnv)); err == nil {
		cfg.LivenessTimeout = d
	}
	return cfg
}

// certDir holds one CA's certificates for the session side and a node.
var certDir string

func TestMain(m *testing.M) {
	if dir := os.Getenv(nodeEnv); dir != "" {
		os.Exit(runNode(dir))
	}
	if spec := os.Getenv(sessionEnv); spec != "" {
		os.Exit(runSession(spec))
	}
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "transport-certs-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if _, err := certs.WriteDev(dir, []string{"session", "node1"}, time.Now()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	certDir = dir
	code := m.Run()
	if shared.tr != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := shared.tr.Stop(ctx)
		cancel()
		shared.sys.Shutdown()
		if err != nil {
			fmt.Fprintln(os.Stderr, "stop:", err)
			code = 1
		}
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	return code
}

func newSystem() *actor.ActorSystem {
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }),
		actor.WithDeadLetterThrottleInterval(time.Millisecond))
}

func notify(t testing.TB, msg string) *wire.Envelope {
	t.Helper()
	env, err := wire.Encode(&wire.Notify{Message: msg}, "k1", 0)
	require.NoError(t, err)
	return env
}

func loadTLS(dir, name string) (*certs.TLS, error) {
	return certs.Load(filepath.Join(dir, "ca.pem"), filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem"), time.Now())
}

// runNode is a node with a well-known "victim" actor. It answers each
// envelope with a Notify of how many it has seen; "watch" makes it watch
// the sender, printing the Terminated it gets; "flood N SIZE" makes it
// send the sender N envelopes of SIZE bytes. It prints its address and
// runs until its stdin closes, then stops its transport.
func runNode(dir string) int {
	tc, err := loadTLS(dir, "node1")
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	sys := newSystem()
	tr, err := Start(sys, testConfig(tc))
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	var out sync.Mutex
	say := func(a ...any) {
		out.Lock()
		defer out.Unlock()
		fmt.Println(a...)
	}
	var seen atomic.Int64
	_, err = sys.Root.SpawnNamed(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *actor.Terminated:
			say("terminated", m.GetWho().GetId(), m.GetWhy())
		case *wire.Envelope:
			n := seen.Add(1)
			// Commands are short; a large envelope is only counted.
			var msg string
			if len(m.GetPayload()) < 1024 && ctx.Sender() != nil {
				if v, err := wire.Decode(m); err == nil {
					msg = v.(*wire.Notify).Message
				}
			}
			{
				if msg == "watch" {
					ctx.Watch(ctx.Sender())
				}
				var count, size int
				if _, err := fmt.Sscanf(msg, "flood %d %d", &count, &size); err == nil {
					if env, err := wire.Encode(&wire.Notify{Message: strings.Repeat("y", size)}, "k1", 0); err == nil {
						for range count {
							ctx.Send(ctx.Sender(), env)
						}
					}
				}
			}
			if env, err := wire.Encode(&wire.Notify{Message: fmt.Sprint(n)}, "k1", 0); err == nil {
				ctx.Respond(env)
			}
		}
	}), "victim")
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	say("address", tr.Address())
	_, _ = io.Copy(io.Discard, os.Stdin)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tr.Stop(ctx); err != nil {
		say("error", err)
		return 1
	}
	return 0
}

// runSession is a session side that talks to the node at the address
// spec names, does what the scenario spec names, stops its transport,
// and checks what a stopped transport does and that nothing of it is
// left. It prints "fail ..." for each failed check, and "done" at its end.
//
//	burst:  sends the node large envelopes back to back and has it send
//	        as many back; all arrive, no watcher is told the node is gone
//	busy:   stops with streams full both ways
//	frozen: stops with the node frozen (the test says so on stdin) and a
//	        stream full
//	ended:  stops with a context that has already ended
//	watched: has the node watch an actor here and says "watched"; told on
//	        stdin, makes a request to the node and says "reached"; told
//	        again, stops that actor and its transport
func runSession(spec string) int {
	addr, scenario, _ := strings.Cut(spec, "|")
	var failed atomic.Bool
	fail := func(format string, a ...any) {
		fmt.Printf("fail "+format+"\n", a...)
		failed.Store(true)
	}
	tc, err := loadTLS(os.Getenv(certsEnv), "session")
	if err != nil {
		fail("%v", err)
		return 1
	}
	sys := newSystem()
	tr, err := Start(sys, testConfig(tc))
	if err != nil {
		fail("%v", err)
		return 1
	}
	victim := actor.NewPID(addr, "victim")
	envelope := func(msg string) *wire.Envelope {
		env, _ := wire.Encode(&wire.Notify{Message: msg}, "k1", 0)
		return env
	}
	if _, err := sys.Root.RequestFuture(victim, envelope("ping"), 30*time.Second).Result(); err != nil {
		fail("first request: %v", err)
		return 1
	}
	fmt.Println("connected")
	// Encoded once: under the race detector on a loaded machine,
	// encoding a MiB takes long enough to change what is tested.
	mib := envelope(strings.Repeat("x", 1<<20))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	switch scenario {
	case "burst":
		burst(sys, victim, fail)
	case "busy":
		var got atomic.Int64
		sink := sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
			if _, ok := ctx.Message().(*wire.Envelope); ok {
				got.Add(1)
			}
		}))
		sys.Root.RequestWithCustomSender(victim, envelope("flood 100 1048576"), sink)
		for range 100 {
			sys.Root.Send(victim, mib)
		}
		// Stop once the flood from the node has begun to arrive.
		deadline := time.Now().Add(time.Minute)
		for got.Load() < 2 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		fmt.Println("stopping with", got.Load(), "of 100 envelopes from the node arrived")
	case "frozen":
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		for range 32 {
			sys.Root.Send(victim, mib)
		}
	case "ended":
		cancel()
	case "watched":
		watched := sys.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
		sys.Root.Send(victim, &actor.MessageEnvelope{Message: envelope("watch"), Sender: watched})
		if _, err := sys.Root.RequestFuture(victim, envelope("ping"), 30*time.Second).Result(); err != nil {
			fail("a request after the watch: %v", err)
		}
		fmt.Println("watched")
		in := bufio.NewReader(os.Stdin)
		_, _ = in.ReadString('\n')
		if _, err := sys.Root.RequestFuture(victim, envelope("ping"), 30*time.Second).Result(); err != nil {
			fail("a request after the node stood still: %v", err)
		}
		fmt.Println("reached")
		_, _ = in.ReadString('\n')
		_ = sys.Root.StopFuture(watched).Wait()
	}
	ctx, stopCancel := context.WithTimeout(ctx, 30*time.Second)
	defer stopCancel()
	start := time.Now()
	err = tr.Stop(ctx)
	fmt.Println("stopped after", time.Since(start), "with", err)
	if err != nil {
		if scenario != "ended" || !errors.Is(err, ErrStopUnfinished) || !errors.Is(err, context.Canceled) {
			fail("stop: %v", err)
		}
		if err := tr.Stop(context.Background()); err != nil {
			fail("second stop: %v", err)
		}
	}
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := tr.Stop(context.Background()); err != nil {
				fail("another stop: %v", err)
			}
		}()
	}
	wg.Wait()

	// Stopped, the transport refuses at once what is sent to peers.
	if _, err := sys.Root.RequestFuture(victim, envelope("ping"), time.Minute).Result(); !errors.Is(err, actor.ErrDeadLetter) {
		fail("a request after the stop: %v", err)
	}
	gone, w := watcher(sys, victim)
	select {
	case m := <-gone:
		if m.GetWhy() != actor.TerminatedReason_AddressTerminated {
			fail("a watch after the stop was answered %v", m.GetWhy())
		}
	case <-time.After(time.Minute):
		fail("a watch after the stop was never answered")
	}
	_ = sys.Root.StopFuture(w).Wait()
	sys.Shutdown()
	if err := goleak.Find(); err != nil {
		fail("left behind: %v", err)
	}
	fmt.Println("done")
	if failed.Load() {
		return 1
	}
	return 0
}

// burst sends 100 envelopes of 1 MiB and 3 near the payload bound to the
// victim back to back, then has the victim send as many back.
func burst(sys *actor.ActorSystem, victim *actor.PID, fail func(string, ...any)) {
	gone, w := watcher(sys, victim)
	defer sys.Root.Stop(w)
	envelope := func(msg string) *wire.Envelope {
		env, _ := wire.Encode(&wire.Notify{Message: msg}, "k1", 0)
		return env
	}
	const small, big = 100, 3
	bigSize := wire.MaxPayloadBytes - 64
	// Encoded once: under the race detector on a loaded machine,
	// encoding a MiB takes long enough to change what is tested.
	mib, huge := envelope(strings.Repeat("x", 1<<20)), envelope(strings.Repeat("x", bigSize))
	start := time.Now()
	var futures []*actor.Future
	for i := range small + big {
		env := mib
		if i >= small {
			env = huge
		}
		futures = append(futures, sys.Root.RequestFuture(victim, env, 3*time.Minute))
	}
	answered := make(chan error, 1)
	go func() {
		counts := map[string]bool{}
		for _, f := range futures {
			res, err := f.Result()
			if err != nil {
				answered <- fmt.Errorf("an envelope to the node: %w", err)
				return
			}
			if v, err := wire.Decode(res.(*wire.Envelope)); err == nil {
				counts[v.(*wire.Notify).Message] = true
			}
		}
		if len(counts) != small+big {
			answered <- fmt.Errorf("%d of %d envelopes counted once", len(counts), small+big)
		}
		close(answered)
	}()
	select {
	case err := <-answered:
		if err != nil {
			fail("%v", err)
			return
		}
	case m := <-gone:
		fail("the node was reported gone during the burst to it: %v", m)
		return
	}
	fmt.Printf("sent %d × 1 MiB and %d × %d bytes to the node in %s\n", small, big, bigSize, time.Since(start))

	start = time.Now()
	var got atomic.Int64
	all := make(chan struct{})
	sink := sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(*wire.Envelope); ok && got.Add(1) == small+big {
			close(all)
		}
	}))
	defer sys.Root.Stop(sink)
	sys.Root.Send(victim, &actor.MessageEnvelope{Message: envelope(fmt.Sprintf("flood %d %d", small, 1<<20)), Sender: sink})
	sys.Root.Send(victim, &actor.MessageEnvelope{Message: envelope(fmt.Sprintf("flood %d %d", big, bigSize)), Sender: sink})
	select {
	case <-all:
		fmt.Printf("got %d × 1 MiB and %d × %d bytes from the node in %s\n", small, big, bigSize, time.Since(start))
	case m := <-gone:
		fail("the node was reported gone during its burst: %v", m)
		return
	case <-time.After(3 * time.Minute):
		fail("%d of %d envelopes from the node arrived", got.Load(), small+big)
	}
	if _, err := sys.Root.RequestFuture(victim, envelope("ping"), time.Minute).Result(); err != nil {
		fail("a request after the burst: %v", err)
	}
	select {
	case m := <-gone:
		fail("a healthy node was reported gone: %v", m)
	default:
	}
}

// proc is this test binary run as a node or a session.
type proc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	addr   string
	lines  chan string
	read   chan struct{} // closed when stdout is read to its end
	killed atomic.Bool
	once   sync.Once
}

// startProc starts one; the test fails if one it did not kill exits with
// anything but 0 (a race report exits 66).
func startProc(t *testing.T, env ...string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), env...)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	p := &proc{cmd: cmd, stdin: stdin, lines: make(chan string, 64), read: make(chan struct{})}
	go func() {
		defer close(p.read)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case p.lines <- sc.Text():
			default: // nobody waits for it
			}
		}
	}()
	t.Cleanup(func() { p.stop(t) })
	return p
}

func startNode(t *testing.T, env ...string) *proc {
	t.Helper()
	n := startProc(t, append(env, nodeEnv+"="+certDir)...)
	n.addr = strings.TrimPrefix(n.waitLine(t, "address ", 30*time.Second), "address ")
	return n
}

// waitLine is the next line that begins with prefix; a line saying
// "error" or "fail" fails the test.
func (p *proc) waitLine(t *testing.T, prefix string, within time.Duration) string {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case line := <-p.lines:
			if strings.HasPrefix(line, prefix) {
				return line
			}
			if strings.HasPrefix(line, "error") || strings.HasPrefix(line, "fail") {
				require.FailNow(t, line)
			}
			t.Log(line)
		case <-deadline:
			require.FailNow(t, "the process did not say "+prefix)
		}
	}
}

func (p *proc) kill() {
	p.killed.Store(true)
	_ = p.cmd.Process.Kill()
}

// stop ends it (by its stdin, or killed after 20 s) and waits for it and
// its reader.
func (p *proc) stop(t *testing.T) {
	p.once.Do(func() {
		p.stdin.Close()
		done := make(chan error, 1)
		go func() { <-p.read; done <- p.cmd.Wait() }()
		var err error
		select {
		case err = <-done:
		case <-time.After(20 * time.Second):
			p.kill()
			err = <-done
		}
		if !p.killed.Load() {
			assert.NoError(t, err, "the process's exit")
		}
	})
}

func sessionTLS(t *testing.T) *certs.TLS {
	t.Helper()
	tc, err := loadTLS(certDir, "session")
	require.NoError(t, err)
	return tc
}

// shared is this process's one remote, with the session certificate,
// stopped when the tests end.
var shared struct {
	once sync.Once
	sys  *actor.ActorSystem
	tr   *Transport
	err  error
}

func client(t *testing.T) *actor.ActorSystem {
	t.Helper()
	shared.once.Do(func() {
		tc, err := loadTLS(certDir, "session")
		if err != nil {
			shared.err = err
			return
		}
		sys := newSystem()
		tr, err := Start(sys, testConfig(tc))
		if err != nil {
			shared.err = err
			return
		}
		shared.sys, shared.tr = sys, tr
	})
	require.NoError(t, shared.err)
	return shared.sys
}

func ping(t *testing.T, sys *actor.ActorSystem, addr string) string {
	t.Helper()
	res, err := sys.Root.RequestFuture(actor.NewPID(addr, "victim"), notify(t, "ping"), 30*time.Second).Result()
	require.NoError(t, err)
	v, err := wire.Decode(res.(*wire.Envelope))
	require.NoError(t, err)
	return v.(*wire.Notify).Message
}

// watcher spawns a local actor watching pid; every Terminated it gets is
// sent on the channel. The caller stops it.
func watcher(sys *actor.ActorSystem, pid *actor.PID) (chan *actor.Terminated, *actor.PID) {
	gone := make(chan *actor.Terminated, 16)
	w := sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *actor.Started:
			ctx.Watch(pid)
		case *actor.Terminated:
			gone <- m
		}
	}))
	return gone, w
}

// watch is a local actor watching pid; every Terminated it gets is sent on
// the channel, and the watch has reached pid's node when watch returns.
func watch(t *testing.T, sys *actor.ActorSystem, pid *actor.PID) chan *actor.Terminated {
	t.Helper()
	gone, w := watcher(sys, pid)
	t.Cleanup(func() { sys.Root.Stop(w) })
	// The watch and a request share the endpoint's queue: once the
	// request is answered, the watch is on the node.
	ping(t, sys, pid.GetAddress())
	return gone
}

// The whole attack surface of a node's port, against one node: the
// victim counts what reached it, and a valid peer is served after each
// attack.
func TestANodesPortServesOnlyPeersWithCertificatesOfItsCA(t *testing.T) {
	node := startNode(t)
	sys := client(t)
	start := time.Now()
	assert.Equal(t, "1", ping(t, sys, node.addr))
	t.Logf("first round trip (connect included): %s", time.Since(start))
	start = time.Now()
	assert.Equal(t, "2", ping(t, sys, node.addr))
	t.Logf("round trip: %s", time.Since(start))

	tc := sessionTLS(t)

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
		ping, _ := proto.Marshal(&wire.Envelope{Kind: pingKind, Seq: 1})
		for _, b := range []*remote.MessageBatch{
			{TypeNames: []string{envelopeType}, Envelopes: []*remote.MessageEnvelope{{TypeId: 3}}},
			{TypeNames: []string{envelopeType}, Targets: []*actor.PID{actor.NewPID(node.addr, "victim")},
				Envelopes: []*remote.MessageEnvelope{{TypeId: 0, Target: 0, Sender: 5}}},
			{TypeNames: []string{"actor.Watch"}, Targets: []*actor.PID{actor.NewPID(node.addr, "victim")},
				Envelopes: []*remote.MessageEnvelope{{TypeId: 0, Target: 0}}},
			// The liveness check's kinds travel only on its own stream.
			{TypeNames: []string{envelopeType}, Targets: []*actor.PID{actor.NewPID(node.addr, "victim")},
				Envelopes: []*remote.MessageEnvelope{{TypeId: 0, Target: 0, MessageData: ping}}},
			// An envelope that is not protobuf.
			{TypeNames: []string{envelopeType}, Targets: []*actor.PID{actor.NewPID(node.addr, "victim")},
				Envelopes: []*remote.MessageEnvelope{{TypeId: 0, Target: 0, MessageData: []byte{0x0a, 0xff}}}},
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
		st, err := conn.NewStream(ctx, livenessStream, "/remote.Remoting/Other")
		require.NoError(t, err)
		assert.Equal(t, codes.Unimplemented, status.Code(st.RecvMsg(new(wire.Envelope))))
	})
	t.Run("the liveness stream answers pings and refuses anything else", func(t *testing.T) {
		st := pingStream(t, node.addr, tc.Client)
		for seq := uint64(1); seq <= 3; seq++ {
			require.NoError(t, st.SendMsg(&wire.Envelope{Kind: pingKind, Seq: seq}))
			var pong wire.Envelope
			require.NoError(t, st.RecvMsg(&pong))
			assert.Equal(t, pongKind, pong.GetKind())
			assert.Equal(t, seq, pong.GetSeq())
		}
		for _, bad := range []*wire.Envelope{
			{Kind: pongKind, Seq: 1},
			{Kind: pingKind, Seq: 1, Incarnation: "k1"},
			{Kind: pingKind, Seq: 1, Payload: []byte("{}")},
			notify(t, "ping"),
		} {
			st := pingStream(t, node.addr, tc.Client)
			require.NoError(t, st.SendMsg(bad))
			err := st.RecvMsg(new(wire.Envelope))
			assert.Equal(t, codes.PermissionDenied, status.Code(err), "%v", bad)
		}
		// Something that is not an envelope at all.
		conn, err := grpc.Dial(node.addr, grpc.WithTransportCredentials(credentials.NewTLS(tc.Client)))
		require.NoError(t, err)
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		raw, err := conn.NewStream(ctx, livenessStream, livenessMethod)
		require.NoError(t, err)
		require.NoError(t, raw.SendMsg(&structpb.Struct{Fields: map[string]*structpb.Value{"x": structpb.NewStringValue("y")}}))
		assert.Error(t, raw.RecvMsg(new(wire.Envelope)))
	})
	t.Run("a peer that pings as fast as it can has its stream closed", func(t *testing.T) {
		st := pingStream(t, node.addr, tc.Client)
		const sent = 2000
		go func() {
			for seq := uint64(1); seq <= sent; seq++ {
				if st.SendMsg(&wire.Envelope{Kind: pingKind, Seq: seq}) != nil {
					return
				}
			}
		}()
		answered := 0
		var err error
		for err == nil {
			var pong wire.Envelope
			if err = st.RecvMsg(&pong); err == nil {
				answered++
			}
		}
		assert.Equal(t, codes.ResourceExhausted, status.Code(err))
		assert.Less(t, answered, sent)
		t.Logf("answered %d of %d pings sent back to back", answered, sent)
	})
	t.Run("a valid peer still gets through", func(t *testing.T) {
		assert.Equal(t, "3", ping(t, sys, node.addr), "no attack reached the victim")
	})
}

// pingStream opens a liveness stream the way a peer's raw gRPC would.
func pingStream(t *testing.T, addr string, cfg *tls.Config) grpc.ClientStream {
	t.Helper()
	conn, err := grpc.Dial(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); conn.Close() })
	st, err := conn.NewStream(ctx, livenessStream, livenessMethod)
	require.NoError(t, err)
	return st
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

	tc, err := loadTLS(certDir, "node1")
	require.NoError(t, err)
	for _, bad := range []string{"nohost", ":80", "127.0.0.1:99999", "127.0.0.1:x"} {
		_, err := Start(sys, Config{Listen: bad, TLS: tc})
		require.ErrorIs(t, err, ErrInvalidConfig, bad)
		assert.Contains(t, err.Error(), bad)
	}
	for _, bad := range []struct {
		interval, timeout time.Duration
		says              string
	}{
		{-time.Second, 0, "liveness_interval -1s is not positive"},
		{0, -time.Second, "liveness_timeout -1s is not positive"},
		{time.Millisecond, time.Second, "liveness_interval 1ms is under 50ms"},
		{time.Second, time.Second, "liveness_timeout 1s is not above liveness_interval 1s"},
		{0, 100 * time.Millisecond, "liveness_timeout 100ms is not above liveness_interval 500ms"},
	} {
		_, err := Start(sys, Config{TLS: tc, LivenessInterval: bad.interval, LivenessTimeout: bad.timeout})
		require.ErrorIs(t, err, ErrInvalidConfig, bad.says)
		assert.Contains(t, err.Error(), bad.says)
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	_, err = Start(sys, Config{Listen: taken.Addr().String(), TLS: tc})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "address already in use")
}

// Large envelopes sent back to back, both ways, all arrive, and no
// watcher is told the node is gone: the endpoint writer batches at most
// three of them, so no gRPC message exceeds the limit (a batch over it
// resets the connection). Both ends are processes of their own, with a
// liveness timeout far above what a loaded machine may starve them.
func TestABurstOfLargeEnvelopesArrivesWhole(t *testing.T) {
	long := timeoutEnv + "=30s"
	node := startNode(t, long)
	session := startProc(t, sessionEnv+"="+node.addr+"|burst", certsEnv+"="+certDir, long)
	session.waitLine(t, "connected", time.Minute)
	t.Log(session.waitLine(t, "sent", 5*time.Minute))
	t.Log(session.waitLine(t, "got", 5*time.Minute))
	session.waitLine(t, "done", 2*time.Minute)
	session.stop(t)
}

// A frozen node is seen gone by the liveness check, well before gRPC's
// keepalive could (its client floor is 10 s): every watcher is told
// AddressTerminated, a request to it fails at once and a new watch is
// answered at once. Thawed, the node sees its own peers gone (they saw it
// gone), and it can be reached again.
func TestAFrozenNodeIsSeenGoneWithinTheLivenessBound(t *testing.T) {
	node := startNode(t)
	sys := client(t)
	victim := actor.NewPID(node.addr, "victim")
	gone := watch(t, sys, victim)

	// The node watches an actor of this side, to show what it sees.
	peer := sys.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	defer sys.Root.Stop(peer)
	sys.Root.RequestWithCustomSender(victim, notify(t, "watch"), peer)
	assert.NotEmpty(t, ping(t, sys, node.addr))
	select {
	case m := <-gone:
		t.Fatalf("a healthy node was reported gone: %v", m)
	default:
	}

	// Whatever happens, the node runs again to be stopped.
	t.Cleanup(func() { _ = node.cmd.Process.Signal(syscall.SIGCONT) })
	require.NoError(t, node.cmd.Process.Signal(syscall.SIGSTOP))
	frozen := time.Now()
	select {
	case m := <-gone:
		assert.Equal(t, actor.TerminatedReason_AddressTerminated, m.Why)
		t.Logf("frozen node seen gone after %s (liveness every %s, timeout %s)", time.Since(frozen), testInterval, testTimeout)
	// gRPC's keepalive would take at least its 10 s floor.
	case <-time.After(9 * time.Second):
		t.Fatal("a frozen node was not seen gone before gRPC's keepalive could have")
	}

	t.Run("a request to it fails at once and a new watch is answered at once", func(t *testing.T) {
		_, err := sys.Root.RequestFuture(victim, notify(t, "ping"), time.Minute).Result()
		assert.ErrorIs(t, err, actor.ErrDeadLetter)
		again, w := watcher(sys, victim)
		defer sys.Root.Stop(w)
		select {
		case m := <-again:
			assert.Equal(t, actor.TerminatedReason_AddressTerminated, m.Why)
		case <-time.After(time.Minute):
			t.Fatal("a watch of a node seen gone was never answered")
		}
	})

	t.Run("thawed, it sees this side gone and can be reached again", func(t *testing.T) {
		require.NoError(t, node.cmd.Process.Signal(syscall.SIGCONT))
		line := node.waitLine(t, "terminated "+peer.GetId(), 30*time.Second)
		assert.Contains(t, line, "AddressTerminated")
		// Each side refuses sends to the other until the other answers a
		// ping sent after it saw it gone: a request fails at once here,
		// and its answer is dropped there, until both have.
		deadline := time.Now().Add(30 * time.Second)
		for tries := 1; ; tries++ {
			_, err := sys.Root.RequestFuture(victim, notify(t, "ping"), testTimeout).Result()
			if err == nil {
				t.Logf("reached again at try %d", tries)
				break
			}
			require.True(t, errors.Is(err, actor.ErrDeadLetter) || errors.Is(err, actor.ErrTimeout), "%v", err)
			require.True(t, time.Now().Before(deadline), "the thawed node was never reached again")
			time.Sleep(testInterval / 5)
		}
		again := watch(t, sys, victim)
		assert.NotEmpty(t, ping(t, sys, node.addr))
		select {
		case m := <-again:
			t.Fatalf("a thawed node was reported gone again: %v", m)
		default:
		}
	})
}

// A node that stood still longer than its liveness timeout (stopped,
// or starved on a loaded machine) while its peer did not see it gone
// does not blame the peer for the answers it could not read: nothing it
// watches there is reported gone.
func TestANodeThatStoodStillDoesNotBlameItsPeers(t *testing.T) {
	node := startNode(t)
	// The session side gives the node far longer than it stands still.
	session := startProc(t, sessionEnv+"="+node.addr+"|watched", certsEnv+"="+certDir, timeoutEnv+"=1m")
	session.waitLine(t, "connected", time.Minute)
	session.waitLine(t, "watched", time.Minute)
	t.Cleanup(func() { _ = node.cmd.Process.Signal(syscall.SIGCONT) })
	require.NoError(t, node.cmd.Process.Signal(syscall.SIGSTOP))
	time.Sleep(testTimeout + 2*testInterval)
	require.NoError(t, node.cmd.Process.Signal(syscall.SIGCONT))
	// Its judge runs every interval: a few of them after the thaw.
	time.Sleep(testTimeout + 2*testInterval)
	_, err := io.WriteString(session.stdin, "check\n")
	require.NoError(t, err)
	session.waitLine(t, "reached", time.Minute)
	for done := false; !done; {
		select {
		case line := <-node.lines:
			assert.False(t, strings.HasPrefix(line, "terminated"), "the node said %q", line)
		default:
			done = true
		}
	}
	_, err = io.WriteString(session.stdin, "stop\n")
	require.NoError(t, err)
	session.waitLine(t, "stopped", 2*time.Minute)
	session.waitLine(t, "done", 2*time.Minute)
	session.stop(t)
}

// A node killed outright is seen gone as soon as its connection breaks.
func TestAKilledNodeIsSeenGoneAtOnce(t *testing.T) {
	node := startNode(t)
	sys := client(t)
	gone := watch(t, sys, actor.NewPID(node.addr, "victim"))
	node.kill()
	killed := time.Now()
	select {
	case m := <-gone:
		assert.Equal(t, actor.TerminatedReason_AddressTerminated, m.Why)
		t.Logf("killed node seen gone after %s", time.Since(killed))
	case <-time.After(9 * time.Second):
		t.Fatal("a killed node was not seen gone")
	}
}

// A peer that only pings, as often as it may, for as long as it likes,
// costs the node an answer per ping and nothing else: no actor sees it,
// and valid peers are served meanwhile.
func TestAPeerThatOnlyPingsDoesNoHarm(t *testing.T) {
	node := startNode(t)
	sys := client(t)
	assert.Equal(t, "1", ping(t, sys, node.addr))
	tc := sessionTLS(t)

	var wg sync.WaitGroup
	answered := make([]int, maxStreamsPerConn)
	stop := make(chan struct{})
	for i := range answered {
		st := pingStream(t, node.addr, tc.Client)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := uint64(1); ; seq++ {
				select {
				case <-stop:
					return
				case <-time.After(MinLivenessInterval):
				}
				var pong wire.Envelope
				if st.SendMsg(&wire.Envelope{Kind: pingKind, Seq: seq}) != nil || st.RecvMsg(&pong) != nil || pong.GetSeq() != seq {
					return
				}
				answered[i]++
			}
		}()
	}
	for i := range 10 {
		assert.Equal(t, strconv.Itoa(i+2), ping(t, sys, node.addr), "only this side's envelopes reach the victim")
		time.Sleep(testInterval / 2)
	}
	close(stop)
	wg.Wait()
	for i, n := range answered {
		assert.Positive(t, n, "stream %d was answered throughout", i)
	}
	t.Logf("pings answered per stream: %v", answered)
}

// Stop ends within its context whatever the peers do, a second Stop
// waits for the same end, a stopped transport refuses sends and answers
// watches at once, and nothing of it is left: each case is a session
// process of its own (see runSession).
func TestStopIsBoundedIdempotentAndLeavesNothing(t *testing.T) {
	for _, scenario := range []string{"busy", "frozen", "ended"} {
		t.Run(scenario, func(t *testing.T) {
			// Streams full both ways may starve a loaded machine's
			// processes for seconds; that stop is not about the bound.
			timeout := timeoutEnv + "=" + testTimeout.String()
			if scenario == "busy" {
				timeout = timeoutEnv + "=10s"
			}
			node := startNode(t, timeout)
			session := startProc(t, sessionEnv+"="+node.addr+"|"+scenario, certsEnv+"="+certDir, timeout)
			session.waitLine(t, "connected", time.Minute)
			if scenario == "frozen" {
				require.NoError(t, node.cmd.Process.Signal(syscall.SIGSTOP))
				defer node.kill()
				_, err := io.WriteString(session.stdin, "frozen\n")
				require.NoError(t, err)
			}
			t.Log(session.waitLine(t, "stopped", 2*time.Minute))
			session.waitLine(t, "done", 2*time.Minute)
			session.stop(t)
		})
	}
}

// A liveness answer counts only for a ping this node sent: a peer that
// answers seqs it was never sent is not believed, and its stream is
// opened again; one that answers what it was sent is.
func TestALivenessAnswerToAPingNeverSentIsNotBelieved(t *testing.T) {
	client(t) // this process's remote starts before any other gRPC here
	for _, honest := range []bool{false, true} {
		t.Run(fmt.Sprintf("honest=%v", honest), func(t *testing.T) {
			tc, err := loadTLS(certDir, "node1")
			require.NoError(t, err)
			var streams atomic.Int64
			srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(tc.Server)), grpc.UnknownServiceHandler(func(_ any, ss grpc.ServerStream) error {
				streams.Add(1)
				for {
					var env wire.Envelope
					if err := ss.RecvMsg(&env); err != nil {
						return err
					}
					seq := env.GetSeq()
					if !honest {
						seq += 1000
					}
					if err := ss.SendMsg(&wire.Envelope{Kind: pongKind, Seq: seq}); err != nil {
						return err
					}
				}
			}))
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			served := make(chan struct{})
			go func() { defer close(served); _ = srv.Serve(ln) }()
			defer func() { srv.Stop(); <-served }()

			cfg, _, _, err := validate(testConfig(sessionTLS(t)))
			require.NoError(t, err)
			tr := &Transport{cfg: cfg, dialer: newDialer()}
			l := newLiveness(tr, []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(cfg.TLS.Client))})
			defer l.stop()
			require.True(t, l.admit(ln.Addr().String()))
			v, _ := l.fast.Load(ln.Addr().String())
			p := v.(*peer)
			first := p.heard.Load()
			deadline := time.Now().Add(time.Minute)
			for p.sent.Load() < 5 {
				require.True(t, time.Now().Before(deadline), "the peer was never pinged")
				time.Sleep(testInterval / 5)
			}
			if honest {
				assert.Greater(t, p.heard.Load(), first, "its answers were believed")
				assert.Equal(t, int64(1), streams.Load(), "one stream served every ping")
			} else {
				assert.Equal(t, first, p.heard.Load(), "no answer was believed")
				assert.Greater(t, streams.Load(), int64(1), "each stream ended at its first answer")
			}
		})
	}
}

package membership

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime/pprof"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/executecode/executecode/internal/cluster/membership/etcdtest"
)

// A member under test that must die without deregistering is this test
// binary run again with memberEnv holding its memberSpec.
const memberEnv = "EXECUTE_CODE_TEST_MEMBERSHIP_MEMBER"

func TestMain(m *testing.M) {
	if spec := os.Getenv(memberEnv); spec != "" {
		os.Exit(runMember(spec))
	}
	goleak.VerifyTestMain(m)
}

type memberSpec struct {
	Endpoint string `json:"endpoint"`
	Prefix   string `json:"prefix"`
	TTL      int    `json:"ttl_s"`
	Member   Member `json:"member"`
}

// runMember registers, says so, and deregisters when its stdin closes.
func runMember(raw string) int {
	var spec memberSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		fmt.Println("error", err)
		return 1
	}
	e, err := DialEtcd(EtcdConfig{Endpoints: []string{spec.Endpoint}, Prefix: spec.Prefix, TTL: time.Duration(spec.TTL) * time.Second})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := e.Register(ctx, spec.Member); err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("registered")
	_, _ = io.Copy(io.Discard, os.Stdin)
	if err := e.Close(ctx); err != nil {
		fmt.Println("error", err)
		return 1
	}
	return 0
}

// memberProc is a member in its own process.
type memberProc struct {
	m     Member
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{}
}

func startMember(t testing.TB, cfg EtcdConfig, m Member) *memberProc {
	t.Helper()
	spec, err := json.Marshal(memberSpec{Endpoint: cfg.Endpoints[0], Prefix: cfg.Prefix, TTL: int(cfg.TTL / time.Second), Member: m})
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	// The race detector's exit pause (a second) is of no use here.
	cmd.Env = append(os.Environ(), memberEnv+"="+string(spec), "GORACE="+os.Getenv("GORACE")+" atexit_sleep_ms=0")
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	p := &memberProc{m: m, cmd: cmd, stdin: stdin, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = stdin.Close()
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "registered", strings.TrimSpace(line), "member %s said", m.Address)
	return p
}

// kill ends the member with SIGKILL: it cannot deregister.
func (p *memberProc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop closes the member's stdin: it deregisters and exits.
func (p *memberProc) stop() { _ = p.stdin.Close() }

// wait waits for the member to exit after stop, which it must do cleanly.
func (p *memberProc) wait(t testing.TB) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("member %s did not exit after its stdin closed", p.m.Address)
	}
	require.True(t, p.cmd.ProcessState.Success(), "member %s: %v", p.m.Address, p.cmd.ProcessState)
}

func freePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// startEtcd is an etcd of the test's own (etcdtest).
func startEtcd(t testing.TB) *etcdtest.Server { return etcdtest.Start(t, nil) }

// newIncarnation is a fresh incarnation, as a node process makes one.
func newIncarnation(t testing.TB) string {
	b := make([]byte, 8)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

// dial is a membership the test closes at its end.
func dial(t testing.TB, cfg EtcdConfig) *Etcd {
	t.Helper()
	e, err := DialEtcd(cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = e.Close(ctx)
	})
	return e
}

// watch starts a feed that ends with the test.
func watch(t testing.TB, e *Etcd) <-chan Event {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ch, err := e.Watch(ctx)
	require.NoError(t, err)
	return ch
}

// next is the feed's next event; a feed silent for bound fails the test
// (the bound keeps a broken feed from hanging it; no time is asserted).
func next(t testing.TB, ch <-chan Event, bound time.Duration) Event {
	t.Helper()
	select {
	case ev, ok := <-ch:
		require.True(t, ok, "the feed closed")
		return ev
	case <-time.After(bound):
		// Where the feed is stuck is the one thing worth knowing then.
		_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
		t.Fatalf("no event from the feed in %v", bound)
		return Event{}
	}
}

// expect checks the next event's kind and member.
func expect(t testing.TB, ch <-chan Event, kind Kind, m Member) {
	t.Helper()
	ev := next(t, ch, 20*time.Second)
	require.Equal(t, Event{Kind: kind, Member: m}, ev)
}

// rawPut writes under the prefix as anyone with access to etcd could.
func rawPut(t testing.TB, e *Etcd, key, value string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := e.client.Put(ctx, key, value)
	require.NoError(t, err)
}

func rawDelete(t testing.TB, e *Etcd, key string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := e.client.Delete(ctx, key)
	require.NoError(t, err)
}

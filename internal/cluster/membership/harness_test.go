package membership

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"
)

// A member under test that must die without deregistering is this test
// binary run again with memberEnv holding its memberSpec.
const memberEnv = "EXECUTE_CODE_TEST_MEMBERSHIP_MEMBER"

// etcdEnv names an etcd binary to use instead of the one `make etcd`
// unpacks.
const etcdEnv = "EXECUTE_CODE_ETCD"

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

// findEtcd is the etcd binary the tests run: $EXECUTE_CODE_ETCD, the one
// `make etcd` unpacks into the repository's bin/.etcd, or etcd on PATH.
func findEtcd() (string, error) {
	const how = "run `make etcd` at the repository's root (it unpacks Debian's etcd-server into bin/.etcd " +
		"with apt-get download, no root needed), or install etcd-server, or set " + etcdEnv
	if p := os.Getenv(etcdEnv); p != "" {
		if _, err := exec.LookPath(p); err != nil {
			return "", fmt.Errorf("%s=%s is not an executable: %w; %s", etcdEnv, p, err, how)
		}
		return p, nil
	}
	if dir, err := os.Getwd(); err == nil {
		for ; ; dir = filepath.Dir(dir) {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				p := filepath.Join(dir, "bin", ".etcd", "root", "usr", "bin", "etcd")
				if _, err := exec.LookPath(p); err == nil {
					return p, nil
				}
				break
			}
			if dir == filepath.Dir(dir) {
				break
			}
		}
	}
	if p, err := exec.LookPath("etcd"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("no etcd binary found: %s", how)
}

// etcdServer is an etcd the test started on loopback, with a data
// directory of its own; it is stopped and removed when the test ends.
type etcdServer struct {
	t      testing.TB
	bin    string
	dir    string
	client string
	peer   string
	log    string
	cmd    *exec.Cmd
	done   chan struct{}
}

func startEtcd(t testing.TB) *etcdServer {
	t.Helper()
	bin, err := findEtcd()
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	s := &etcdServer{t: t, bin: bin, dir: filepath.Join(root, "data"), log: filepath.Join(root, "etcd.log")}
	t.Cleanup(s.stop)
	var lastErr error
	// The ports are free when picked, but another process may take one
	// before etcd binds it: then etcd exits, and new ports are tried.
	for range 3 {
		s.client, s.peer = freePort(t), freePort(t)
		if lastErr = s.start(); lastErr == nil {
			return s
		}
		_ = os.RemoveAll(s.dir)
	}
	t.Fatalf("etcd did not start: %v\n%s", lastErr, s.logTail())
	return nil
}

func freePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

func (s *etcdServer) endpoint() string { return "http://" + s.client }

func (s *etcdServer) start() error {
	logf, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	// A 10 ms heartbeat and 100 ms election make the smallest lease etcd
	// grants 1 s (at its defaults, 2 s), and a restarted etcd a leader
	// at once.
	cmd := exec.Command(s.bin,
		"--name", "test", "--data-dir", s.dir,
		"--listen-client-urls", "http://"+s.client, "--advertise-client-urls", "http://"+s.client,
		"--listen-peer-urls", "http://"+s.peer, "--initial-advertise-peer-urls", "http://"+s.peer,
		"--initial-cluster", "test=http://"+s.peer,
		"--heartbeat-interval", "10", "--election-timeout", "100",
		"--logger", "zap", "--log-outputs", "stderr", "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	s.cmd, s.done = cmd, make(chan struct{})
	go func(done chan struct{}) {
		_ = cmd.Wait()
		close(done)
	}(s.done)
	return s.waitReady()
}

// waitReady waits until etcd answers a read, or fails if it exits.
func (s *etcdServer) waitReady() error {
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{s.endpoint()}, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer c.Close()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			return errors.New("etcd exited")
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		_, err = c.Get(ctx, "ready")
		cancel()
		if err == nil {
			return nil
		}
	}
	s.kill()
	return fmt.Errorf("etcd did not answer in 20s: %w", err)
}

// kill ends etcd with SIGKILL, keeping its data.
func (s *etcdServer) kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// restart starts etcd again on the same ports and data.
func (s *etcdServer) restart() {
	s.t.Helper()
	if err := s.start(); err != nil {
		s.t.Fatalf("etcd did not restart: %v\n%s", err, s.logTail())
	}
}

func (s *etcdServer) stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		s.kill()
	}
	s.cmd = nil
}

func (s *etcdServer) logTail() string {
	b, _ := os.ReadFile(s.log)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

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

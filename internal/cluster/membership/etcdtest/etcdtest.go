// Package etcdtest starts a real etcd for tests: on loopback, with free
// ports and a data directory of the test's, stopped and removed when the
// test ends. The binary is the one `make etcd` unpacks into the
// repository's bin/.etcd, $EXECUTE_CODE_ETCD, or etcd on PATH; without
// one the test fails, saying how to get it.
//
// It is imported by test files only, never by the runtime; like the
// runtime's own machinery, it carries no compatibility promise.
package etcdtest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Env names an etcd binary to use instead of the one `make etcd` unpacks.
const Env = "EXECUTE_CODE_ETCD"

// Find is the etcd binary the tests run.
func Find() (string, error) {
	const how = "run `make etcd` at the repository's root (it unpacks Debian's etcd-server into bin/.etcd " +
		"with apt-get download, no root needed), or install etcd-server, or set " + Env
	if p := os.Getenv(Env); p != "" {
		if _, err := exec.LookPath(p); err != nil {
			return "", fmt.Errorf("%s=%s is not an executable: %w; %s", Env, p, err, how)
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

// TLS are the files of an etcd that serves clients over TLS and requires
// their certificates.
type TLS struct {
	CA, Cert, Key string
	// Client is the TLS a test's own client uses.
	Client *tls.Config
}

// Server is an etcd the test started.
type Server struct {
	t      testing.TB
	bin    string
	dir    string
	client string
	peer   string
	log    string
	tls    *TLS
	cmd    *exec.Cmd
	done   chan struct{}
}

// Start starts etcd with a 10 ms heartbeat and a 100 ms election, which
// make the smallest lease it grants 1 s and a restarted etcd a leader at
// once. With tls it serves clients over TLS only.
func Start(t testing.TB, tls *TLS) *Server {
	t.Helper()
	bin, err := Find()
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	s := &Server{t: t, bin: bin, dir: filepath.Join(root, "data"), log: filepath.Join(root, "etcd.log"), tls: tls}
	t.Cleanup(s.Stop)
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
	t.Fatalf("etcd did not start: %v\n%s", lastErr, s.LogTail())
	return nil
}

func freePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Addr is the client endpoint's host:port.
func (s *Server) Addr() string { return s.client }

// Endpoint is the client endpoint's URL.
func (s *Server) Endpoint() string {
	if s.tls != nil {
		return "https://" + s.client
	}
	return "http://" + s.client
}

func (s *Server) start() error {
	logf, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	args := []string{"--name", "test", "--data-dir", s.dir,
		"--listen-client-urls", s.Endpoint(), "--advertise-client-urls", s.Endpoint(),
		"--listen-peer-urls", "http://" + s.peer, "--initial-advertise-peer-urls", "http://" + s.peer,
		"--initial-cluster", "test=http://" + s.peer,
		"--heartbeat-interval", "10", "--election-timeout", "100",
		"--logger", "zap", "--log-outputs", "stderr", "--log-level", "warn"}
	if s.tls != nil {
		args = append(args, "--cert-file", s.tls.Cert, "--key-file", s.tls.Key,
			"--trusted-ca-file", s.tls.CA, "--client-cert-auth")
	}
	cmd := exec.Command(s.bin, args...)
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

// Client is a client of the test's, closed when the test ends.
func (s *Server) Client() *clientv3.Client {
	s.t.Helper()
	c, err := s.newClient()
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}

func (s *Server) newClient() (*clientv3.Client, error) {
	cfg := clientv3.Config{Endpoints: []string{s.Endpoint()}, Logger: zap.NewNop(), DialTimeout: 5 * time.Second}
	if s.tls != nil {
		cfg.TLS = s.tls.Client
	}
	return clientv3.New(cfg)
}

// waitReady waits until etcd answers a read, or fails if it exits.
func (s *Server) waitReady() error {
	c, err := s.newClient()
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
	s.Kill()
	return fmt.Errorf("etcd did not answer in 20s: %w", err)
}

// Kill ends etcd with SIGKILL, keeping its data.
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// Restart starts etcd again on the same ports and data.
func (s *Server) Restart() {
	s.t.Helper()
	if err := s.start(); err != nil {
		s.t.Fatalf("etcd did not restart: %v\n%s", err, s.LogTail())
	}
}

// Stop ends etcd (SIGTERM, then SIGKILL after 10 s).
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		s.Kill()
	}
	s.cmd = nil
}

// LogTail is the end of etcd's log, for a failing test's message.
func (s *Server) LogTail() string {
	b, _ := os.ReadFile(s.log)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

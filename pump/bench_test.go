package pump

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/executecode/executecode/internal/bell"
	"github.com/executecode/executecode/tools"
)

func benchConfig(b *testing.B) (Config, string) {
	b.Helper()
	dir := filepath.Join(b.TempDir(), "rpc-bench")
	if err := os.Mkdir(dir, 0o700); err != nil {
		b.Fatal(err)
	}
	token, err := NewToken()
	if err != nil {
		b.Fatal(err)
	}
	read := echoTool("read")
	return Config{
		Dir: dir, Token: token, Tools: map[string]tools.Tool{"read": read},
		MaxCalls: 1 << 30, MaxResultBytes: 1 << 62,
	}, dir
}

// writeBenchRequest publishes a request the way the shim does.
func writeBenchRequest(b *testing.B, dir, token string, id int64) {
	body, _ := json.Marshal(map[string]any{"id": id, "tool": "read", "params": map[string]any{"text": "hello"}})
	name := RequestName(token, id, body)
	tmp := filepath.Join(dir, name+".tmp")
	if err := os.WriteFile(tmp, body, 0o600); err != nil {
		b.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkSweepOneRequest is one helper call's host-side cost: publish a
// request, sweep, read the response.
func BenchmarkSweepOneRequest(b *testing.B) {
	cfg, dir := benchConfig(b)
	stats := newStats()
	ctx := context.Background()
	var id int64
	for b.Loop() {
		id++
		writeBenchRequest(b, dir, cfg.Token, id)
		if err := sweepOnce(ctx, cfg, &stats); err != nil {
			b.Fatal(err)
		}
		res := filepath.Join(dir, responseName(id))
		if _, err := os.ReadFile(res); err != nil {
			b.Fatal(err)
		}
		_ = os.Remove(res)
	}
}

// shimRoundTrips plays the shim for b.Loop: publish a request, ring, wait
// for the ring back, read the response.
func shimRoundTrips(b *testing.B, dir, token string, bells *bell.Pair) {
	ring, back := bells.ChildFiles()[0], bells.ChildFiles()[1]
	buf := make([]byte, 64)
	one := []byte{1}
	var id int64
	for b.Loop() {
		id++
		writeBenchRequest(b, dir, token, id)
		if _, err := ring.Write(one); err != nil {
			b.Fatal(err)
		}
		res := filepath.Join(dir, responseName(id))
		for {
			if _, err := os.Stat(res); err == nil {
				break
			}
			if _, err := back.Read(buf); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := os.ReadFile(res); err != nil {
			b.Fatal(err)
		}
		_ = os.Remove(res)
	}
}

// BenchmarkRunRoundTrip is a helper call's round trip through a per-call
// run's server and the doorbells, as the shim sees it: publish, ring,
// wait for the ring back, read the response.
func BenchmarkRunRoundTrip(b *testing.B) {
	cfg, dir := benchConfig(b)
	bells, err := bell.New()
	if err != nil {
		b.Fatal(err)
	}
	defer bells.Close()
	cfg.Bells = bells
	cfg.PollInterval = time.Hour
	exited := make(chan struct{})
	run := StartRun(context.Background(), cfg, exited)
	shimRoundTrips(b, dir, cfg.Token, bells)
	close(exited)
	run.Wait()
}

// BenchmarkServerRoundTrip is the same round trip through a session
// server: its wake-up subscription, a sweep goroutine per wake-up, and
// settlement in the server's loop.
func BenchmarkServerRoundTrip(b *testing.B) {
	cfg, dir := benchConfig(b)
	bells, err := bell.New()
	if err != nil {
		b.Fatal(err)
	}
	defer bells.Close()
	cfg.Bells = bells
	cfg.PollInterval = time.Hour
	srv, err := StartServer(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Stop(context.Background())
	shimRoundTrips(b, dir, cfg.Token, bells)
}

// BenchmarkRunLifecycle is what a per-call run pays for its server
// besides its calls: start it with bells on an empty bridge, let the
// interpreter exit, and wait for the final drain.
func BenchmarkRunLifecycle(b *testing.B) {
	cfg, _ := benchConfig(b)
	bells, err := bell.New()
	if err != nil {
		b.Fatal(err)
	}
	defer bells.Close()
	cfg.Bells = bells
	ctx := context.Background()
	for b.Loop() {
		exited := make(chan struct{})
		run := StartRun(ctx, cfg, exited)
		close(exited)
		run.Wait()
	}
}

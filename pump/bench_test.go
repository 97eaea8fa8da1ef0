package pump

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
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
	bells := benchBells(b)
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
	bells := benchBells(b)
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
	bells := benchBells(b)
	cfg.Bells = bells
	ctx := context.Background()
	for b.Loop() {
		exited := make(chan struct{})
		run := StartRun(ctx, cfg, exited)
		close(exited)
		run.Wait()
	}
}

// BenchmarkServerCellEnd is what a session cell's end waits for from its
// server, on a bridge holding a text block and a notification as an
// ordinary cell leaves it, two ways alternately: Abort, DrainAndStats,
// the text blocks and Stop one after the other (the end before Finish),
// and Finish and the text blocks, with Stop run beside the next cell as
// the runtime runs it, off the cell's path. Medians of cellEndSamples
// ends each.
func BenchmarkServerCellEnd(b *testing.B) {
	cfg, dir := benchConfig(b)
	bells := benchBells(b)
	cfg.Bells = bells
	cfg.PollInterval = time.Hour
	ctx := context.Background()
	stopped := make(chan struct{})
	close(stopped)
	end := func(finish bool) time.Duration {
		<-stopped
		writeBenchFrame(b, dir, cfg.Token, KindText, `{"text": "hi"}`)
		writeBenchFrame(b, dir, cfg.Token, KindNotify, `{"n": 1, "msg": "m"}`)
		srv, err := StartServer(cfg)
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if finish {
			if _, err := srv.Finish(ctx); err != nil {
				b.Fatal(err)
			}
			_ = ReadTextBlocks(dir, cfg.Token, 1<<20, nil)
			d := time.Since(t0)
			stopped = make(chan struct{})
			go func(done chan struct{}) {
				srv.Stop(ctx)
				close(done)
			}(stopped)
			return d
		}
		srv.Abort(ctx)
		if _, err := srv.DrainAndStats(ctx); err != nil {
			b.Fatal(err)
		}
		_ = ReadTextBlocks(dir, cfg.Token, 1<<20, nil)
		srv.Stop(ctx)
		return time.Since(t0)
	}
	for b.Loop() {
		var before, after []time.Duration
		for range cellEndSamples {
			before = append(before, end(false))
			after = append(after, end(true))
		}
		<-stopped
		mb, ma := medianDuration(before), medianDuration(after)
		b.ReportMetric(float64(mb.Nanoseconds())/1000, "abort-drain-stop-us")
		b.ReportMetric(float64(ma.Nanoseconds())/1000, "finish-us")
		b.ReportMetric(float64(ma)/float64(mb), "finish/abort-drain-stop-ratio")
	}
}

const cellEndSamples = 500

func medianDuration(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// writeBenchFrame publishes a frame of kind with sequence number 1 the
// way the shim does.
func writeBenchFrame(b *testing.B, dir, token, kind, body string) {
	name := FrameName(kind, "1", FrameMAC(token, kind, "1", []byte(body)))
	if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
		b.Fatal(err)
	}
}

// benchBells is a doorbell pair the benchmark's cleanup closes.
func benchBells(b *testing.B) *bell.Pair {
	bells, err := bell.New()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { bells.Close() })
	return bells
}

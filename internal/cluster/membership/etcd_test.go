package membership

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/internal/cluster/membership/etcdtest"
)

// logSink collects log lines written from the feed's goroutine.
type logSink struct {
	ch chan string
}

func (b *logSink) Write(p []byte) (int, error) {
	select {
	case b.ch <- string(p):
	default:
	}
	return len(p), nil
}

func (b *logSink) lines() []string {
	var out []string
	for {
		select {
		case l := <-b.ch:
			out = append(out, l)
		default:
			return out
		}
	}
}

func testConfig(s *etcdtest.Server) EtcdConfig {
	return EtcdConfig{Endpoints: []string{s.Endpoint()}, Prefix: "/test/nodes/", TTL: time.Second}
}

// Three nodes register from processes of their own; one is SIGKILLed and
// leaves within its lease, one deregisters and leaves at once, and nodes
// restarted on the same addresses come back as new incarnations.
func TestMembersJoinDieLeaveAndRestart(t *testing.T) {
	s := startEtcd(t)
	cfg := testConfig(s)
	e := dial(t, cfg)
	feed := watch(t, e)

	ms := []Member{
		{Address: "127.0.0.1:7001", Incarnation: newIncarnation(t), Capacity: 2},
		{Address: "127.0.0.1:7002", Incarnation: newIncarnation(t), Capacity: 4},
		{Address: "127.0.0.1:7003", Incarnation: newIncarnation(t), Capacity: 1},
	}
	procs := make([]*memberProc, len(ms))
	for i, m := range ms {
		procs[i] = startMember(t, cfg, m)
		expect(t, feed, Joined, m)
	}

	// Death without a word: the lease runs out.
	killed := time.Now()
	procs[0].kill()
	expect(t, feed, Left, ms[0])
	t.Logf("SIGKILLed member left the feed %v after its death (TTL %v)", time.Since(killed).Round(time.Millisecond), cfg.TTL)

	// A graceful stop revokes the lease: the record goes at once.
	stopped := time.Now()
	procs[1].stop()
	expect(t, feed, Left, ms[1])
	t.Logf("deregistered member left the feed %v after it was told to stop", time.Since(stopped).Round(time.Millisecond))
	procs[1].wait(t)

	// Restarted where the dead one was: a new incarnation joins.
	again := Member{Address: ms[0].Address, Incarnation: newIncarnation(t), Capacity: 3}
	startMember(t, cfg, again)
	expect(t, feed, Joined, again)

	// Killed and restarted at once, before its lease runs out: the new
	// record replaces the old, which leaves then (or had left already).
	procs[2].kill()
	third := Member{Address: ms[2].Address, Incarnation: newIncarnation(t), Capacity: 1}
	startMember(t, cfg, third)
	expect(t, feed, Left, ms[2])
	expect(t, feed, Joined, third)

	// A feed started now lists exactly the live members.
	late := watch(t, e)
	expect(t, late, Joined, again)
	expect(t, late, Joined, third)
}

// hostileRecords are what anyone with write access to etcd might put
// under the prefix; none is a member.
func hostileRecords() map[string]string {
	return map[string]string{
		"127.0.0.1:9001":                 "\xff\xfe\x00garbage\x1b[31m",
		"127.0.0.1:9002":                 `{"address":"127.0.0.1:9002","incarnation":"aa","capacity":1,"pad":"` + strings.Repeat("x", 1<<20) + `"}`,
		"127.0.0.1:9003":                 `{"address":"127.0.0.1:9003","incarnation":"aa","capacity":"4"}`,
		"127.0.0.1:9004":                 `{"address":"127.0.0.1:9004","incarnation":"aa","capacity":1,"admin":true}`,
		"127.0.0.1:9005":                 `{"address":"127.0.0.1:9006","incarnation":"aa","capacity":1}`,
		"127.0.0.1:9007":                 `{"address":"127.0.0.1:9007","incarnation":"a/../b","capacity":1}`,
		"127.0.0.1:9008":                 `{"address":"127.0.0.1:9008","incarnation":"aa","capacity":1000000000}`,
		"127.0.0.1:9009":                 `{"address":"127.0.0.1:9009","incarnation":"aa","capacity":1} {}`,
		"127.0.0.1:9010":                 `[1,2,3]`,
		"127.0.0.1:9011":                 `null`,
		"127.0.0.1:9012":                 ``,
		"no-port":                        `{"address":"no-port","incarnation":"aa","capacity":1}`,
		"sub/127.0.0.1:9013":             `{"address":"127.0.0.1:9013","incarnation":"aa","capacity":1}`,
		"\x1b]0;title\x07127.0.0.1:9014": `{"address":"127.0.0.1:9014","incarnation":"aa","capacity":1}`,
	}
}

// Hostile records under the prefix are refused with a log line naming
// the key, never the value, and change nothing: neither a live feed nor
// a listing one; a valid record written after them is the next event.
func TestHostileRecordsAreRefused(t *testing.T) {
	s := startEtcd(t)
	cfg := testConfig(s)
	logs := &logSink{ch: make(chan string, 256)}
	log := zerolog.New(logs)
	feedCfg := cfg
	feedCfg.Log = &log
	e := dial(t, feedCfg)
	feed := watch(t, e)

	live := Member{Address: "127.0.0.1:7001", Incarnation: newIncarnation(t), Capacity: 2}
	reg, err := dial(t, cfg).Register(context.Background(), live)
	require.NoError(t, err)
	expect(t, feed, Joined, live)

	hostile := hostileRecords()
	for k, v := range hostile {
		rawPut(t, e, cfg.Prefix+k, v)
	}
	sentinel := Member{Address: "127.0.0.1:7999", Incarnation: "sentinel", Capacity: 1}
	value, err := encodeMember(sentinel)
	require.NoError(t, err)
	rawPut(t, e, cfg.Prefix+sentinel.Address, string(value))
	expect(t, feed, Joined, sentinel)

	// Same incarnation, new capacity: updated, not rejoined.
	sentinel.Capacity = 5
	value, err = encodeMember(sentinel)
	require.NoError(t, err)
	rawPut(t, e, cfg.Prefix+sentinel.Address, string(value))
	expect(t, feed, Updated, sentinel)
	rawDelete(t, e, cfg.Prefix+sentinel.Address)
	expect(t, feed, Left, sentinel)

	refusals := 0
	for _, l := range logs.lines() {
		if strings.Contains(l, "refused a member record") {
			refusals++
			assert.NotContains(t, l, "garbage")
			assert.NotContains(t, l, "xxxxxxxx")
			assert.NotContains(t, l, "\x1b")
			assert.Less(t, len(l), 600, "a refusal's line is short: %s", l)
		}
	}
	assert.Equal(t, len(hostile), refusals, "one refusal per hostile record")

	// A listing meets the same records and refuses them alike.
	expect(t, watch(t, e), Joined, live)

	// A refused record written over a live member's is no registration:
	// the member leaves, as if its record were deleted.
	rawPut(t, e, cfg.Prefix+live.Address, "\x00not a record")
	expect(t, feed, Left, live)
	require.NoError(t, reg.Deregister(context.Background()))
}

// etcd killed: the feed reports Failed once and keeps its members; etcd
// back: the feed reports Recovered and follows again, and a member that
// lived through the outage is still (or again) a member.
func TestFeedFailsWhileEtcdIsDownAndRecovers(t *testing.T) {
	s := startEtcd(t)
	cfg := testConfig(s)
	cfg.Probe = 100 * time.Millisecond
	cfg.CallTimeout = 500 * time.Millisecond
	e := dial(t, cfg)
	feed := watch(t, e)
	// A node's calls wait longer than the client's reconnect pause, so
	// the first one after etcd is back succeeds.
	nodeCfg := cfg
	nodeCfg.CallTimeout = 2 * time.Second
	node := dial(t, nodeCfg)

	m1 := Member{Address: "127.0.0.1:7001", Incarnation: newIncarnation(t), Capacity: 2}
	r1, err := node.Register(context.Background(), m1)
	require.NoError(t, err)
	expect(t, feed, Joined, m1)

	s.Kill()
	ev := next(t, feed, 20*time.Second)
	require.Equal(t, Failed, ev.Kind, "%+v", ev)
	require.ErrorIs(t, ev.Err, ErrUnavailable)

	// Registering while etcd is down fails within the call's bound.
	m2 := Member{Address: "127.0.0.1:7002", Incarnation: newIncarnation(t), Capacity: 1}
	_, err = node.Register(context.Background(), m2)
	require.ErrorIs(t, err, ErrUnavailable)

	s.Restart()
	// Until Recovered, only the differences a listing found: m1 may have
	// lost its old lease before it registered again.
	view := map[string]Member{m1.Address: m1}
	for {
		ev := next(t, feed, 30*time.Second)
		require.NotEqual(t, Failed, ev.Kind, "a second failure before recovery: %+v", ev)
		if ev.Kind == Recovered {
			break
		}
		apply(view, ev)
	}
	waitView(t, feed, view, map[string]Member{m1.Address: m1})

	_, err = node.Register(context.Background(), m2)
	require.NoError(t, err)
	waitView(t, feed, view, map[string]Member{m1.Address: m1, m2.Address: m2})
	require.NoError(t, r1.Deregister(context.Background()))
	waitView(t, feed, view, map[string]Member{m2.Address: m2})
}

// apply folds a membership event into a view by address.
func apply(view map[string]Member, ev Event) {
	switch ev.Kind {
	case Joined, Updated:
		view[ev.Member.Address] = ev.Member
	case Left:
		if view[ev.Member.Address] == ev.Member {
			delete(view, ev.Member.Address)
		}
	}
}

// waitView reads events into view until it equals want.
func waitView(t *testing.T, feed <-chan Event, view, want map[string]Member) {
	t.Helper()
	for !equalViews(view, want) {
		ev := next(t, feed, 30*time.Second)
		require.Contains(t, []Kind{Joined, Updated, Left}, ev.Kind, "%+v", ev)
		apply(view, ev)
	}
}

func equalViews(a, b map[string]Member) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// With no etcd at all, a feed says Failed and a registration fails, each
// within the call's bound; closing ends both cleanly.
func TestNoEtcdFailsClearly(t *testing.T) {
	cfg := EtcdConfig{Endpoints: []string{"http://" + freePort(t)}, CallTimeout: 200 * time.Millisecond, Probe: 50 * time.Millisecond}
	e := dial(t, cfg)
	feed := watch(t, e)
	ev := next(t, feed, 20*time.Second)
	require.Equal(t, Failed, ev.Kind)
	require.ErrorIs(t, ev.Err, ErrUnavailable)
	_, err := e.Register(context.Background(), Member{Address: "127.0.0.1:7001", Incarnation: "a", Capacity: 1})
	require.ErrorIs(t, err, ErrUnavailable)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, e.Close(ctx))
	_, open := <-feed
	for open {
		_, open = <-feed
	}
	_, err = e.Watch(context.Background())
	require.ErrorIs(t, err, ErrClosed)
	_, err = e.Register(context.Background(), Member{Address: "127.0.0.1:7001", Incarnation: "a", Capacity: 1})
	require.ErrorIs(t, err, ErrClosed)
}

func TestConfigRefusals(t *testing.T) {
	for name, cfg := range map[string]EtcdConfig{
		"no endpoints":       {},
		"empty endpoint":     {Endpoints: []string{" "}},
		"fractional TTL":     {Endpoints: []string{"http://127.0.0.1:1"}, TTL: 1500 * time.Millisecond},
		"sub-second TTL":     {Endpoints: []string{"http://127.0.0.1:1"}, TTL: 500 * time.Millisecond},
		"negative TTL":       {Endpoints: []string{"http://127.0.0.1:1"}, TTL: -time.Second},
		"relative prefix":    {Endpoints: []string{"http://127.0.0.1:1"}, Prefix: "nodes/"},
		"unclosed prefix":    {Endpoints: []string{"http://127.0.0.1:1"}, Prefix: "/nodes"},
		"root prefix":        {Endpoints: []string{"http://127.0.0.1:1"}, Prefix: "/"},
		"negative timeout":   {Endpoints: []string{"http://127.0.0.1:1"}, CallTimeout: -time.Second},
		"probe too frequent": {Endpoints: []string{"http://127.0.0.1:1"}, Probe: time.Millisecond},
	} {
		_, err := DialEtcd(cfg)
		assert.ErrorIs(t, err, ErrConfig, name)
	}
}

// A node never registers what its peers would refuse.
func TestRegisterRefusesABadMember(t *testing.T) {
	e := dial(t, EtcdConfig{Endpoints: []string{"http://" + freePort(t)}, CallTimeout: 100 * time.Millisecond})
	for _, m := range []Member{
		{Address: "127.0.0.1", Incarnation: "a", Capacity: 1},
		{Address: "127.0.0.1:7001", Incarnation: "", Capacity: 1},
		{Address: "127.0.0.1:7001", Incarnation: "a", Capacity: 0},
		{Address: "127.0.0.1:7001/x", Incarnation: "a", Capacity: 1},
	} {
		_, err := e.Register(context.Background(), m)
		assert.ErrorIs(t, err, ErrMalformed, "%+v", m)
	}
}

// The tests fail, never skip, without etcd, and say how to get it.
func TestMissingEtcdSaysHowToGetIt(t *testing.T) {
	t.Setenv(etcdtest.Env, "/nonexistent/etcd")
	_, err := etcdtest.Find()
	require.Error(t, err)
	require.Contains(t, err.Error(), "make etcd")
}

// BenchmarkLeave measures how long a member takes to leave the feed after
// its death by SIGKILL (its lease runs out) and after a graceful stop (it
// revokes its lease), as ratios to the TTL; a member is its own process.
// Run with -benchtime 10x: each iteration lasts about a TTL.
func BenchmarkLeave(b *testing.B) {
	for _, ttl := range []time.Duration{time.Second, DefaultTTL} {
		b.Run("ttl="+ttl.String(), func(b *testing.B) {
			s := startEtcd(b)
			cfg := testConfig(s)
			cfg.TTL = ttl
			e := dial(b, cfg)
			feed := watch(b, e)
			var killed, stopped, worst time.Duration
			for i := range b.N {
				m := Member{Address: fmt.Sprintf("127.0.0.1:%d", 7000+i), Incarnation: newIncarnation(b), Capacity: 1}
				p := startMember(b, cfg, m)
				expect(b, feed, Joined, m)
				t0 := time.Now()
				p.kill()
				expect(b, feed, Left, m)
				d := time.Since(t0)
				killed += d
				worst = max(worst, d)

				m.Incarnation = newIncarnation(b)
				p = startMember(b, cfg, m)
				expect(b, feed, Joined, m)
				t0 = time.Now()
				p.stop()
				expect(b, feed, Left, m)
				stopped += time.Since(t0)
				p.wait(b)
			}
			n := float64(b.N) * float64(ttl)
			b.ReportMetric(float64(killed)/n, "kill-leave/ttl")
			b.ReportMetric(float64(worst)/float64(ttl), "worst-kill-leave/ttl")
			b.ReportMetric(float64(stopped)/n, "stop-leave/ttl")
		})
	}
}

// A listing pages through more records than one call returns, refusing
// the hostile ones among them, and lists every valid one exactly once.
func TestListingPagesThroughManyRecords(t *testing.T) {
	s := startEtcd(t)
	cfg := testConfig(s)
	e := dial(t, cfg)
	want := map[string]Member{}
	for i := range 3*pageSize + 5 {
		m := Member{Address: fmt.Sprintf("127.0.0.1:%d", 10000+i), Incarnation: fmt.Sprintf("n%d", i), Capacity: 1 + i%4}
		value, err := encodeMember(m)
		require.NoError(t, err)
		rawPut(t, e, cfg.Prefix+m.Address, string(value))
		want[m.Address] = m
		if i%7 == 0 {
			rawPut(t, e, cfg.Prefix+m.Address+"x", "\xffgarbage")
		}
	}
	feed := watch(t, e)
	got := map[string]Member{}
	for range want {
		ev := next(t, feed, 20*time.Second)
		require.Equal(t, Joined, ev.Kind)
		require.NotContains(t, got, ev.Member.Address, "listed twice")
		got[ev.Member.Address] = ev.Member
	}
	require.Equal(t, want, got)
}

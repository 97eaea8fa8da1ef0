package membership

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// Defaults of EtcdConfig.
const (
	DefaultPrefix      = "/execute-code/nodes/"
	DefaultTTL         = 3 * time.Second
	DefaultCallTimeout = 2 * time.Second
	DefaultProbe       = time.Second
)

// Bounds on what the feed holds and reads at once.
const (
	// maxMembers bounds the members a feed holds: records past it are
	// refused, so a flood of keys under the prefix cannot grow it.
	maxMembers = 4096
	// pageSize records per listing call: with etcd's value limit (1.5
	// MiB by default) one page stays under the client's receive limit
	// even if every value is as large as etcd allows.
	pageSize       = 32
	maxReceive     = 64 << 20
	minBackoff     = 100 * time.Millisecond
	maxBackoff     = 5 * time.Second
	maxReconnect   = time.Second
	maxTTL         = time.Hour
	maxCallTimeout = time.Minute
)

// EtcdConfig configures a membership over etcd.
type EtcdConfig struct {
	// Endpoints are the etcd client URLs (http://127.0.0.1:2379, or
	// https:// with TLS).
	Endpoints []string
	// TLS, if set, is the client's TLS configuration.
	TLS *tls.Config
	// Prefix is where the members' records live, one key per address;
	// DefaultPrefix if empty. It must begin and end with '/'.
	Prefix string
	// TTL is a registration's lease: a node that dies without
	// deregistering leaves the feed within about TTL. Whole seconds (as
	// etcd counts leases), at least 1 s; DefaultTTL if zero. etcd raises
	// a TTL under its minimum (1.5 election timeouts, rounded up), and
	// the registration logs the TTL granted.
	TTL time.Duration
	// CallTimeout bounds every call to etcd; DefaultCallTimeout if zero.
	CallTimeout time.Duration
	// Probe is how often a feed checks that etcd answers, since a watch
	// on a lost connection waits silently; DefaultProbe if zero.
	Probe time.Duration
	// Log gets the feed's and the registrations' lines; none if nil.
	Log *zerolog.Logger
}

func (c *EtcdConfig) normalize() error {
	if len(c.Endpoints) == 0 {
		return fmt.Errorf("%w: Endpoints is empty", ErrConfig)
	}
	for _, e := range c.Endpoints {
		if strings.TrimSpace(e) == "" {
			return fmt.Errorf("%w: an endpoint is empty", ErrConfig)
		}
	}
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if !strings.HasPrefix(c.Prefix, "/") || !strings.HasSuffix(c.Prefix, "/") || len(c.Prefix) < 2 {
		return fmt.Errorf("%w: Prefix %s must begin and end with '/' and name something", ErrConfig, printable(c.Prefix))
	}
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.TTL < time.Second || c.TTL > maxTTL || c.TTL%time.Second != 0 {
		return fmt.Errorf("%w: TTL %v is not whole seconds between 1s and %v (etcd counts leases in seconds)", ErrConfig, c.TTL, maxTTL)
	}
	if c.CallTimeout == 0 {
		c.CallTimeout = DefaultCallTimeout
	}
	if c.CallTimeout < 0 || c.CallTimeout > maxCallTimeout {
		return fmt.Errorf("%w: CallTimeout %v is not between 0 and %v", ErrConfig, c.CallTimeout, maxCallTimeout)
	}
	if c.Probe == 0 {
		c.Probe = DefaultProbe
	}
	if c.Probe < 10*time.Millisecond {
		return fmt.Errorf("%w: Probe %v is under 10ms", ErrConfig, c.Probe)
	}
	if c.Log == nil {
		nop := zerolog.Nop()
		c.Log = &nop
	}
	return nil
}

// Etcd is a membership kept in etcd: kernel nodes Register, session
// sides Watch. One Etcd holds one client; Close ends its feeds and
// deregisters its registrations.
type Etcd struct {
	cfg    EtcdConfig
	client *clientv3.Client
	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	closed bool
	regs   map[*Registration]struct{}
}

var _ Feed = (*Etcd)(nil)

// DialEtcd makes the client; it does not wait for etcd, whose absence the
// first call (each within CallTimeout) or the feed's Failed event tells.
func DialEtcd(cfg EtcdConfig) (*Etcd, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	client, err := clientv3.New(clientv3.Config{
		Endpoints:          cfg.Endpoints,
		TLS:                cfg.TLS,
		Context:            ctx,
		MaxCallRecvMsgSize: maxReceive,
		// gRPC's reconnect pause grows to 2 minutes by default: after
		// an outage, calls would fail for that long after etcd is back.
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: minBackoff, Multiplier: 1.6, Jitter: 0.2, MaxDelay: maxReconnect},
			MinConnectTimeout: cfg.CallTimeout,
		})},
		// The client's own lines would go to stderr; what matters is
		// logged here, through cfg.Log.
		Logger: zap.NewNop(),
	})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return &Etcd{cfg: cfg, client: client, ctx: ctx, cancel: cancel, regs: map[*Registration]struct{}{}}, nil
}

// call runs one etcd call within CallTimeout (and ctx), wrapping its
// failure in ErrUnavailable.
func call[T any](ctx context.Context, e *Etcd, what string, f func(context.Context) (T, error)) (T, error) {
	cctx, cancel := context.WithTimeout(ctx, e.cfg.CallTimeout)
	defer cancel()
	v, err := f(cctx)
	if err != nil {
		return v, fmt.Errorf("%w: %s: %w", ErrUnavailable, what, err)
	}
	return v, nil
}

// Close deregisters every registration still held (each within
// CallTimeout), ends every feed and closes the client.
func (e *Etcd) Close(ctx context.Context) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	regs := make([]*Registration, 0, len(e.regs))
	for r := range e.regs {
		regs = append(regs, r)
	}
	e.mu.Unlock()
	var errs []error
	for _, r := range regs {
		errs = append(errs, r.Deregister(ctx))
	}
	e.cancel()
	e.wg.Wait()
	errs = append(errs, e.client.Close())
	return errors.Join(errs...)
}

// start runs f in a goroutine Close waits for, unless closed.
func (e *Etcd) start(f func()) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		f()
	}()
	return nil
}

// Registration is one member's record in etcd, kept alive by its lease
// until Deregister, or until the process dies and the lease runs out.
type Registration struct {
	e      *Etcd
	member Member
	key    string
	value  string
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	lease clientv3.LeaseID
	once  sync.Once
	err   error
}

// Register puts m's record under the prefix with a lease of TTL and keeps
// the lease alive in the background. If the lease is lost (etcd was
// unreachable for a TTL, or lost it), the member registers again as soon
// as etcd answers. The first registration's failure is returned.
func (e *Etcd) Register(ctx context.Context, m Member) (*Registration, error) {
	value, err := encodeMember(m)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	r := &Registration{e: e, member: m, key: e.cfg.Prefix + m.Address, value: string(value), done: make(chan struct{})}
	lease, err := r.put(ctx)
	if err != nil {
		return nil, err
	}
	r.lease = lease
	kctx, cancel := context.WithCancel(e.ctx)
	r.cancel = cancel
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		cancel()
		close(r.done)
		_, _ = call(ctx, e, "revoke", func(c context.Context) (*clientv3.LeaseRevokeResponse, error) { return e.client.Revoke(c, lease) })
		return nil, ErrClosed
	}
	e.regs[r] = struct{}{}
	e.wg.Add(1)
	e.mu.Unlock()
	go func() {
		defer e.wg.Done()
		r.keep(kctx)
	}()
	return r, nil
}

// put grants a lease and puts the record with it.
func (r *Registration) put(ctx context.Context) (clientv3.LeaseID, error) {
	e := r.e
	ttl := int64(e.cfg.TTL / time.Second)
	g, err := call(ctx, e, "grant a lease", func(c context.Context) (*clientv3.LeaseGrantResponse, error) { return e.client.Grant(c, ttl) })
	if err != nil {
		return 0, err
	}
	if g.TTL != ttl {
		e.cfg.Log.Info().Str("member", r.member.Address).Int64("ttl_s", g.TTL).Int64("asked_s", ttl).
			Msg("execute_code membership: etcd granted another lease TTL")
	}
	_, err = call(ctx, e, "put the member record", func(c context.Context) (*clientv3.PutResponse, error) {
		return e.client.Put(c, r.key, r.value, clientv3.WithLease(g.ID))
	})
	if err != nil {
		// The lease would hold nothing: let it go now rather than at TTL.
		_, _ = call(ctx, e, "revoke", func(c context.Context) (*clientv3.LeaseRevokeResponse, error) { return e.client.Revoke(c, g.ID) })
		return 0, err
	}
	return g.ID, nil
}

// keep keeps the lease alive and registers again when it is lost, until
// ctx ends.
func (r *Registration) keep(ctx context.Context) {
	defer close(r.done)
	log := r.e.cfg.Log
	backoff := minBackoff
	for {
		r.mu.Lock()
		lease := r.lease
		r.mu.Unlock()
		if lease != 0 {
			// The channel closes when the lease is gone, or when no
			// answer came for a TTL; draining it is required, or the
			// client drops answers and complains.
			if ka, err := r.e.client.KeepAlive(ctx, lease); err == nil {
				for range ka {
				}
			}
			if ctx.Err() != nil {
				return
			}
			log.Warn().Str("member", r.member.Address).Msg("execute_code membership: the member's lease was lost; registering again")
		}
		lease, err := r.put(ctx)
		r.mu.Lock()
		r.lease = lease
		r.mu.Unlock()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			log.Warn().Err(err).Str("member", r.member.Address).Dur("retry_in", backoff).
				Msg("execute_code membership: registering again failed")
			if !sleep(ctx, backoff) {
				return
			}
			// Retry at least as often as a keepalive would go: when etcd
			// returns, the old lease still holds the record for about a
			// TTL, and a new one put in that time means no leave is seen.
			backoff = min(2*backoff, max(minBackoff, r.e.cfg.TTL/3))
			continue
		}
		backoff = minBackoff
		log.Info().Str("member", r.member.Address).Msg("execute_code membership: the member registered again")
	}
}

// Deregister revokes the lease, which removes the record at once (if it
// is still this registration's), and stops keeping it alive. It is safe
// to call more than once.
func (r *Registration) Deregister(ctx context.Context) error {
	r.once.Do(func() {
		r.cancel()
		<-r.done
		r.e.mu.Lock()
		delete(r.e.regs, r)
		r.e.mu.Unlock()
		r.mu.Lock()
		lease := r.lease
		r.mu.Unlock()
		if lease == 0 {
			return
		}
		_, err := call(ctx, r.e, "revoke the member's lease", func(c context.Context) (*clientv3.LeaseRevokeResponse, error) {
			return r.e.client.Revoke(c, lease)
		})
		if err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			r.err = err
		}
	})
	return r.err
}

// Watch follows the prefix: the members live now as Joined, then every
// change. When etcd stops answering (a call or a probe past CallTimeout)
// the feed reports Failed once, keeps its members, and lists again with
// a growing pause; when a listing succeeds it reports the differences and
// Recovered, and follows from there.
func (e *Etcd) Watch(ctx context.Context) (<-chan Event, error) {
	out := make(chan Event, 16)
	f := &feed{e: e, out: out, members: map[string]Member{}}
	wctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(e.ctx, cancel)
	err := e.start(func() {
		defer close(out)
		defer stop()
		defer cancel()
		f.run(wctx)
	})
	if err != nil {
		stop()
		cancel()
		return nil, err
	}
	return out, nil
}

// feed is one Watch's state: the valid records under the prefix, by
// address.
type feed struct {
	e       *Etcd
	out     chan<- Event
	members map[string]Member
	failing bool
}

func (f *feed) run(ctx context.Context) {
	backoff := minBackoff
	for ctx.Err() == nil {
		rev, err := f.sync(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			f.fail(ctx, err)
			if !sleep(ctx, backoff) {
				return
			}
			backoff = min(2*backoff, maxBackoff)
			continue
		}
		backoff = minBackoff
		if f.failing {
			f.failing = false
			f.e.cfg.Log.Info().Msg("execute_code membership reachable again: etcd answers")
			if !f.emit(ctx, Event{Kind: Recovered}) {
				return
			}
		}
		err = f.follow(ctx, rev)
		if err != nil && ctx.Err() == nil && !errors.Is(err, rpctypes.ErrCompacted) {
			f.fail(ctx, err)
		}
	}
}

// fail reports the first failure of an outage.
func (f *feed) fail(ctx context.Context, err error) {
	if f.failing {
		return
	}
	f.failing = true
	f.e.cfg.Log.Warn().Err(err).Msg("execute_code membership unreachable: etcd does not answer; the nodes known are kept, and retried")
	f.emit(ctx, Event{Kind: Failed, Err: err})
}

func (f *feed) emit(ctx context.Context, ev Event) bool {
	select {
	case f.out <- ev:
		return true
	case <-ctx.Done():
		return false
	}
}

// sync lists the prefix at one revision, page by page, and reports the
// differences from what the feed holds.
func (f *feed) sync(ctx context.Context) (int64, error) {
	e := f.e
	prefix := e.cfg.Prefix
	end := clientv3.GetPrefixRangeEnd(prefix)
	now := map[string]Member{}
	var rev int64
	from := prefix
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(pageSize)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := call(ctx, e, "list the members", func(c context.Context) (*clientv3.GetResponse, error) {
			return e.client.Get(c, from, opts...)
		})
		if err != nil {
			return 0, err
		}
		if rev == 0 {
			rev = resp.Header.GetRevision()
		}
		for _, kv := range resp.Kvs {
			m, ok := f.decode(kv.Key, kv.Value)
			if !ok {
				continue
			}
			if len(now) >= maxMembers {
				e.cfg.Log.Warn().Str("key", printable(string(kv.Key))).Int("max", maxMembers).
					Msg("execute_code membership: refused a member record: too many members")
				continue
			}
			now[m.Address] = m
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	for addr, old := range f.members {
		if _, ok := now[addr]; !ok {
			delete(f.members, addr)
			if !f.emit(ctx, Event{Kind: Left, Member: old}) {
				return 0, ctx.Err()
			}
		}
	}
	for _, addr := range slices.Sorted(maps.Keys(now)) {
		if !f.set(ctx, now[addr]) {
			return 0, ctx.Err()
		}
	}
	return rev, nil
}

// follow watches the prefix from rev+1, probing etcd every Probe, until
// the watch fails, a probe fails or ctx ends.
func (f *feed) follow(ctx context.Context, rev int64) error {
	e := f.e
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	// The client's Watch waits for etcd to confirm the watch, for as
	// long as etcd is away: it runs aside, under the probes, and ends
	// when wctx does.
	created := make(chan clientv3.WatchChan, 1)
	go func() {
		created <- e.client.Watch(wctx, e.cfg.Prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1), clientv3.WithFragment())
	}()
	var wch clientv3.WatchChan // nil until created: never ready
	defer func() {
		cancel()
		if wch == nil {
			<-created
		}
	}()
	probe := time.NewTicker(e.cfg.Probe)
	defer probe.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case wch = <-created:
		case resp, ok := <-wch:
			if !ok {
				return fmt.Errorf("%w: the watch ended", ErrUnavailable)
			}
			if err := resp.Err(); err != nil {
				return fmt.Errorf("%w: watch: %w", ErrUnavailable, err)
			}
			for _, ev := range resp.Events {
				if !f.apply(ctx, ev) {
					return ctx.Err()
				}
			}
		case <-probe.C:
			// A watch whose connection is lost waits for it silently;
			// one cheap linearizable read tells whether etcd answers.
			_, err := call(ctx, e, "probe", func(c context.Context) (*clientv3.GetResponse, error) {
				return e.client.Get(c, e.cfg.Prefix, clientv3.WithCountOnly())
			})
			if err != nil {
				return err
			}
		}
	}
}

func (f *feed) apply(ctx context.Context, ev *clientv3.Event) bool {
	addr := strings.TrimPrefix(string(ev.Kv.Key), f.e.cfg.Prefix)
	if ev.Type == mvccpb.PUT {
		if m, ok := f.decode(ev.Kv.Key, ev.Kv.Value); ok {
			return f.set(ctx, m)
		}
	}
	// A deleted record, or one replaced by a refused one: the address
	// has no valid registration now.
	old, ok := f.members[addr]
	if !ok {
		return true
	}
	delete(f.members, addr)
	return f.emit(ctx, Event{Kind: Left, Member: old})
}

// set records m as the member at its address, reporting the change.
func (f *feed) set(ctx context.Context, m Member) bool {
	old, ok := f.members[m.Address]
	switch {
	case !ok:
		if len(f.members) >= maxMembers {
			f.e.cfg.Log.Warn().Str("member", m.Address).Int("max", maxMembers).
				Msg("execute_code membership: refused a member record: too many members")
			return true
		}
		f.members[m.Address] = m
		return f.emit(ctx, Event{Kind: Joined, Member: m})
	case old.Incarnation != m.Incarnation:
		f.members[m.Address] = m
		return f.emit(ctx, Event{Kind: Left, Member: old}) && f.emit(ctx, Event{Kind: Joined, Member: m})
	case old.Capacity != m.Capacity:
		f.members[m.Address] = m
		return f.emit(ctx, Event{Kind: Updated, Member: m})
	}
	return true
}

// decode reads one record, logging a refusal with its key (bounded and
// quoted), never its value.
func (f *feed) decode(key, value []byte) (Member, bool) {
	name, _ := strings.CutPrefix(string(key), f.e.cfg.Prefix)
	m, err := decodeMember(name, value)
	if err != nil {
		f.e.cfg.Log.Warn().Err(err).Str("key", printable(string(key))).
			Msg("execute_code membership: refused a member record")
		return Member{}, false
	}
	return m, true
}

// sleep waits d unless ctx ends first, saying whether it waited.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

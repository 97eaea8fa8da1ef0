// Package placement is the session side of the cluster
// (docs/cluster.md): the node directory that kernel nodes join, the
// registry starter that places each new kernel on the least loaded live
// node (the local node counting as one), the proxy actor that stands for
// a remote kernel in the registry, and the cell bridge that runs a
// remote cell's helper calls here.
//
// It is the runtime's own machinery: its exported names serve sibling
// packages and carry no compatibility promise.
package placement

import (
	"sort"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"github.com/executecode/executecode/internal/cluster/kernelhost"
	"github.com/executecode/executecode/internal/cluster/membership"
	"github.com/executecode/executecode/internal/cluster/wire"
)

// node is a kernel node that said hello or that the membership feed
// lists, watched.
type node struct {
	pid         *actor.PID
	incarnation string
	capacity    int
	kernels     int
}

// Pauses before a node the directory lost, but the feed still lists, is
// watched again: a node cut off for a moment (the liveness timeout) comes
// back as a hello would bring it back under Join; one that is really
// gone is refused at once by the transport and leaves the feed within
// its lease.
const (
	minReadmit = time.Second
	maxReadmit = 30 * time.Second
)

// localNode is the directory's name for the session side's own kernels.
const localNode = ""

// directory is the well-known actor kernel nodes join.
type directory struct {
	incarnation   string
	localCapacity int
	localKernels  int
	nodes         map[string]*node // by address
	// placed are the kernels placed, watched: proxies for remote ones,
	// workers for local ones, with the node address they count against.
	placed map[string]string
	log    *zerolog.Logger
	// capacity is every live node's capacity summed, the local one's
	// included, published for the registry's cap (Cluster.Capacity).
	capacity *atomic.Int64
	// members are the membership feed's nodes by address (none under
	// Join); readmit is the pause before a lost member is watched again.
	members map[string]membership.Member
	readmit map[string]time.Duration
}

// publishCapacity stores the sum of the live nodes' capacities.
func (d *directory) publishCapacity() {
	total := d.localCapacity
	for _, n := range d.nodes {
		total += n.capacity
	}
	d.capacity.Store(int64(total))
}

// Messages the starter and the snapshot send the directory.
type (
	// placeMsg asks where a kernel goes, skipping the nodes in exclude
	// (those that refused this kernel already).
	placeMsg struct {
		exclude map[string]bool
		reply   chan<- placement
	}
	// placement is where a kernel goes: address "" is the local node.
	placement struct {
		address string
		host    *actor.PID
		ok      bool
	}
	placedMsg struct {
		pid     *actor.PID
		address string
	}
	// memberMsg is one event of the membership feed.
	memberMsg struct{ ev membership.Event }
	// readmitMsg: watch the member again if the feed still lists it.
	readmitMsg struct{ member membership.Member }
	unplaceMsg struct{ address string }
	// abandonMsg: the caller of a placeMsg stopped waiting for its reply;
	// sent after it, so the reply is in the channel by then.
	abandonMsg struct{ reply chan placement }
	nodesMsg   struct{ reply chan<- []NodeStatus }
)

// NodeStatus is one node as the snapshot shows it: where it is, what it
// takes and how many kernels it holds; never which sessions.
type NodeStatus struct {
	Address  string `json:"address"`
	Local    bool   `json:"local,omitempty"`
	Capacity int    `json:"capacity"`
	Kernels  int    `json:"kernels"`
}

func (d *directory) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *wire.Envelope:
		d.onEnvelope(ctx, m)
	case *actor.Terminated:
		d.onTerminated(ctx, m)
	case placeMsg:
		m.reply <- d.place(m.exclude)
	case placedMsg:
		d.placed[m.pid.String()] = m.address
		ctx.Watch(m.pid)
	case unplaceMsg:
		d.release(m.address)
	case abandonMsg:
		select {
		case pl := <-m.reply:
			if pl.ok {
				d.release(pl.address) // counted for a start nobody makes
			}
		default:
		}
	case nodesMsg:
		m.reply <- d.statuses()
	case memberMsg:
		d.onMember(ctx, m.ev)
	case readmitMsg:
		if cur, ok := d.members[m.member.Address]; ok && cur.Incarnation == m.member.Incarnation {
			if _, known := d.nodes[cur.Address]; !known {
				d.admitMember(ctx, cur, true)
			}
		}
	}
}

// onMember applies one event of the membership feed: Joined is a hello,
// Left (of the incarnation held) the node's loss, Updated a new capacity.
func (d *directory) onMember(ctx actor.Context, ev membership.Event) {
	m := ev.Member
	switch ev.Kind {
	case membership.Joined:
		d.members[m.Address] = m
		delete(d.readmit, m.Address)
		d.admitMember(ctx, m, false)
	case membership.Updated:
		d.members[m.Address] = m
		if n, ok := d.nodes[m.Address]; ok && n.incarnation == m.Incarnation {
			d.setCapacity(n, m.Capacity)
			d.log.Info().Str("node", m.Address).Int("capacity", m.Capacity).Msg("execute_code cluster node's capacity changed")
		}
	case membership.Left:
		if cur, ok := d.members[m.Address]; ok && cur.Incarnation == m.Incarnation {
			delete(d.members, m.Address)
			delete(d.readmit, m.Address)
		}
		if n, ok := d.nodes[m.Address]; ok && n.incarnation == m.Incarnation {
			// Its kernels' proxies watch their kernels and learn of the
			// node's end themselves; a node whose record was removed
			// while it runs keeps its kernels and gets no new one.
			delete(d.nodes, m.Address)
			ctx.Unwatch(n.pid)
			d.publishCapacity()
			d.log.Warn().Str("node", m.Address).Msg("execute_code cluster node left the membership")
		}
	case membership.Failed, membership.Recovered:
		// Nothing changes here: the directory keeps its nodes while the
		// feed cannot reach its service, and its own watches still see a
		// node go. The feed logs each outage and its end once.
	}
}

// admit makes m a node of the directory, watched at its node's
// kernelhost, whether its hello or the membership told of it; a node of
// another incarnation at the address is replaced. It says whether m is
// new here (a known one only takes m's capacity).
func (d *directory) admit(ctx actor.Context, m membership.Member) bool {
	if n, ok := d.nodes[m.Address]; ok && n.incarnation == m.Incarnation {
		d.setCapacity(n, m.Capacity)
		return false
	}
	// New, or restarted on the same address: the old one's kernels are
	// gone and their proxies learn it themselves.
	pid := actor.NewPID(m.Address, kernelhost.Name)
	d.nodes[m.Address] = &node{pid: pid, incarnation: m.Incarnation, capacity: m.Capacity, kernels: d.placedOn(m.Address)}
	d.publishCapacity()
	ctx.Watch(pid)
	return true
}

// admitMember is admit for the membership's word; again is a readmission
// after a failed watch, logged quietly.
func (d *directory) admitMember(ctx actor.Context, m membership.Member, again bool) {
	if !d.admit(ctx, m) {
		return
	}
	ev := d.log.Info()
	if again {
		ev = d.log.Debug()
	}
	ev.Str("node", m.Address).Int("capacity", m.Capacity).Msg("execute_code cluster node joined through the membership")
}

// setCapacity gives n capacity c.
func (d *directory) setCapacity(n *node, c int) {
	if n.capacity != c {
		n.capacity = c
		d.publishCapacity()
	}
}

func (d *directory) onEnvelope(ctx actor.Context, env *wire.Envelope) {
	v, err := wire.Decode(env)
	if err != nil {
		d.log.Warn().Err(err).Msg("execute_code cluster directory refused a message")
		return
	}
	hello, ok := v.(*wire.NodeHello)
	if !ok {
		return
	}
	sender := ctx.Sender()
	// A node speaks for itself only: the hello's kernelhost is its sender.
	if sender == nil || sender.Address != hello.Node.Address || hello.Node.ID != kernelhost.Name {
		d.log.Warn().Msg("execute_code cluster directory refused a hello not from its node")
		return
	}
	// The sender is the node's kernelhost (checked above), which admit
	// watches.
	if d.admit(ctx, membership.Member{Address: sender.Address, Incarnation: hello.Incarnation, Capacity: hello.Capacity}) {
		d.log.Info().Str("node", sender.Address).Int("capacity", hello.Capacity).Msg("execute_code cluster node joined")
	}
	welcome, err := wire.Encode(&wire.NodeWelcome{
		Directory:   wire.PID{Address: ctx.Self().Address, ID: ctx.Self().Id},
		Incarnation: d.incarnation,
	}, hello.Incarnation, env.GetSeq())
	if err == nil {
		ctx.Send(sender, welcome)
	}
}

func (d *directory) onTerminated(ctx actor.Context, m *actor.Terminated) {
	key := m.Who.String()
	if addr, ok := d.placed[key]; ok {
		delete(d.placed, key)
		d.release(addr)
		return
	}
	n, ok := d.nodes[m.Who.Address]
	if !ok || !n.pid.Equal(m.Who) {
		return
	}
	delete(d.nodes, m.Who.Address)
	d.publishCapacity()
	member, listed := d.members[m.Who.Address]
	if !listed || member.Incarnation != n.incarnation {
		d.log.Warn().Str("node", m.Who.Address).Str("why", m.Why.String()).Msg("execute_code cluster node lost")
		return
	}
	// The feed still lists it: watched again after a pause, growing while
	// it stays unreachable, until the feed says it left.
	pause, again := d.readmit[member.Address]
	if !again {
		pause = minReadmit
		d.log.Warn().Str("node", m.Who.Address).Str("why", m.Why.String()).Msg("execute_code cluster node lost")
	}
	d.readmit[member.Address] = min(2*pause, maxReadmit)
	self, root := ctx.Self(), ctx.ActorSystem().Root
	time.AfterFunc(pause, func() { root.Send(self, readmitMsg{member: member}) })
}

// placedOn counts the kernels placed at address whose proxies live: a
// node admitted again still holds those of its incarnation, and those of
// an older one release their count as their proxies end.
func (d *directory) placedOn(address string) int {
	n := 0
	for _, a := range d.placed {
		if a == address {
			n++
		}
	}
	return n
}

func (d *directory) release(address string) {
	if address == localNode {
		d.localKernels = max(0, d.localKernels-1)
		return
	}
	if n, ok := d.nodes[address]; ok {
		n.kernels = max(0, n.kernels-1)
	}
}

// place picks the live node with the lowest share of its capacity in use,
// and among equals the one with the most free; the local node takes part
// when it has capacity. The pick is counted at once, so concurrent starts
// spread. Nodes in exclude are skipped.
func (d *directory) place(exclude map[string]bool) placement {
	type cand struct {
		address   string
		used, cap int
		host      *actor.PID
	}
	var cs []cand
	if d.localKernels < d.localCapacity {
		cs = append(cs, cand{address: localNode, used: d.localKernels, cap: d.localCapacity})
	}
	for addr, n := range d.nodes {
		if n.kernels < n.capacity && !exclude[addr] {
			cs = append(cs, cand{address: addr, used: n.kernels, cap: n.capacity, host: n.pid})
		}
	}
	if len(cs) == 0 {
		return placement{}
	}
	sort.Slice(cs, func(i, j int) bool {
		a, b := cs[i], cs[j]
		if a.used*b.cap != b.used*a.cap {
			return a.used*b.cap < b.used*a.cap
		}
		if a.cap-a.used != b.cap-b.used {
			return a.cap-a.used > b.cap-b.used
		}
		return a.address < b.address
	})
	c := cs[0]
	if c.address == localNode {
		d.localKernels++
	} else {
		d.nodes[c.address].kernels++
	}
	return placement{address: c.address, host: c.host, ok: true}
}

func (d *directory) statuses() []NodeStatus {
	out := make([]NodeStatus, 0, len(d.nodes)+1)
	if d.localCapacity > 0 {
		out = append(out, NodeStatus{Address: "local", Local: true, Capacity: d.localCapacity, Kernels: d.localKernels})
	}
	addrs := make([]string, 0, len(d.nodes))
	for a := range d.nodes {
		addrs = append(addrs, a)
	}
	sort.Strings(addrs)
	for _, a := range addrs {
		n := d.nodes[a]
		out = append(out, NodeStatus{Address: a, Capacity: n.capacity, Kernels: n.kernels})
	}
	return out
}

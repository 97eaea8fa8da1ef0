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

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"github.com/executecode/executecode/internal/cluster/kernelhost"
	"github.com/executecode/executecode/internal/cluster/wire"
)

// node is a kernel node that said hello.
type node struct {
	pid         *actor.PID
	incarnation string
	capacity    int
	kernels     int
}

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
	placeMsg struct{ reply chan<- placement }
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
	unplaceMsg struct{ address string }
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
		d.onTerminated(m)
	case placeMsg:
		m.reply <- d.place()
	case placedMsg:
		d.placed[m.pid.String()] = m.address
		ctx.Watch(m.pid)
	case unplaceMsg:
		d.release(m.address)
	case nodesMsg:
		m.reply <- d.statuses()
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
	if old, known := d.nodes[sender.Address]; !known || old.incarnation != hello.Incarnation {
		// A new node, or one restarted on the same address: the old
		// one's kernels are gone and their proxies learn it themselves.
		d.nodes[sender.Address] = &node{pid: sender, incarnation: hello.Incarnation, capacity: hello.Capacity}
		d.publishCapacity()
		ctx.Watch(sender)
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

func (d *directory) onTerminated(m *actor.Terminated) {
	key := m.Who.String()
	if addr, ok := d.placed[key]; ok {
		delete(d.placed, key)
		d.release(addr)
		return
	}
	if n, ok := d.nodes[m.Who.Address]; ok && n.pid.Equal(m.Who) {
		delete(d.nodes, m.Who.Address)
		d.publishCapacity()
		d.log.Warn().Str("node", m.Who.Address).Str("why", m.Why.String()).Msg("execute_code cluster node lost")
	}
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
// spread.
func (d *directory) place() placement {
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
		if n.kernels < n.capacity {
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

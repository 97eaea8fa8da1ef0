// Package kernelhost is a kernel node's side of the cluster
// (docs/cluster.md): the well-known kernelhost actor that says hello to
// the session side, starts a kernel actor per StartKernel, and the kernel
// actors that run cells through the node's Host with a gate that forwards
// every helper call to the session side's cell bridge.
//
// Every message from a peer is an envelope decoded with wire.Decode; a
// malformed or unknown one is answered Refused (when it asked for an
// answer) and harms no kernel.
//
// It is the runtime's own machinery: its exported names serve sibling
// packages and carry no compatibility promise.
package kernelhost

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"github.com/executecode/executecode/internal/cluster/wire"
)

// Name is the kernelhost actor's well-known id on every kernel node.
const Name = "kernelhost"

// DirectoryName is the session side's node directory's well-known id.
const DirectoryName = "nodes"

// ErrNoCapacity is a StartKernel refused because the node is full.
var ErrNoCapacity = errors.New("node has no free capacity")

// Host runs kernels on this node: the runtime's session machinery.
type Host interface {
	// StartKernel starts the kernel req asks for, named incarnation.
	StartKernel(ctx context.Context, incarnation string, req *wire.StartKernel) (Kernel, error)
}

// Kernel is one kernel of this node.
type Kernel interface {
	// Run runs cell, its helper calls through gate and its notify()s
	// through notify, and says how it ended. ctx ends with a CancelCell or
	// the owner's loss.
	Run(ctx context.Context, cell *wire.RunCell, gate Gate, notify func(string)) *wire.CellResult
	// Stop ends the kernel and returns once its interpreter is gone.
	Stop(ctx context.Context)
}

// Gate runs one claimed helper call on the session side. The node's pump
// dispatches to it through PumpGate; the one a kernel is handed is a
// Sender, so a wave's calls leave in claim order.
type Gate interface {
	Run(ctx context.Context, call *wire.ToolCall) *wire.ToolAnswer
}

// Config configures a node's kernelhost.
type Config struct {
	Host Host
	// Directory is the session side's node directory to say hello to
	// (actor.NewPID(joinAddr, DirectoryName)); nil says hello to nobody.
	Directory *actor.PID
	// Capacity is how many kernels the node runs at once.
	Capacity int
	// HelloInterval is how often an unwelcomed node says hello again.
	HelloInterval time.Duration
	// StopTimeout bounds one kernel's stop.
	StopTimeout time.Duration
	Logger      *zerolog.Logger
}

func (c Config) withDefaults() Config {
	if c.Capacity <= 0 {
		c.Capacity = 16
	}
	if c.HelloInterval <= 0 {
		c.HelloInterval = time.Second
	}
	if c.StopTimeout <= 0 {
		c.StopTimeout = 15 * time.Second
	}
	if c.Logger == nil {
		nop := zerolog.Nop()
		c.Logger = &nop
	}
	return c
}

// NewIncarnation is a fresh random incarnation id.
func NewIncarnation() string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("incarnation: %v", err)) // the kernel's RNG failing is not recoverable
	}
	return hex.EncodeToString(b[:])
}

// Start spawns the kernelhost actor on sys under its well-known name.
// The node's incarnation is returned for its logs.
func Start(sys *actor.ActorSystem, cfg Config) (*actor.PID, string, error) {
	cfg = cfg.withDefaults()
	if cfg.Host == nil {
		return nil, "", errors.New("kernelhost: no Host")
	}
	inc := NewIncarnation()
	props := actor.PropsFromProducer(func() actor.Actor { return newHost(cfg, inc) },
		actor.WithSupervisor(actor.NewOneForOneStrategy(0, 0, func(any) actor.Directive { return actor.StopDirective })))
	pid, err := sys.Root.SpawnNamed(props, Name)
	if err != nil {
		return nil, "", fmt.Errorf("kernelhost: %w", err)
	}
	return pid, inc, nil
}

// reply sends env's answer to the asker, if there is one to send to.
func reply(ctx actor.Context, to *actor.PID, payload any, incarnation string, seq uint64) {
	if to == nil {
		return
	}
	env, err := wire.Encode(payload, incarnation, seq)
	if err != nil {
		return
	}
	ctx.Send(to, env)
}

// refuse answers a request that was not carried out.
func refuse(ctx actor.Context, to *actor.PID, incarnation string, seq uint64, reason string) {
	if !wire.ValidIncarnation(incarnation) {
		incarnation = "-"
	}
	reply(ctx, to, &wire.Refused{Reason: reason}, incarnation, seq)
}

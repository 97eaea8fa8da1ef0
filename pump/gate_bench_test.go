package pump

import (
	"context"
	"testing"
	"time"

	"github.com/executecode/executecode/internal/bell"
)

// BenchmarkServerRoundTripGuarded is BenchmarkServerRoundTrip with the
// node's half of a remote cell: the server's gate is a Sender that hands
// each call, as JSON, to a GuardedGate around the local gate, as the
// cell's bridge does without the network. Its difference from
// BenchmarkServerRoundTrip is what the guard and the hand-over cost.
func BenchmarkServerRoundTripGuarded(b *testing.B) {
	cfg, dir := benchConfig(b)
	bells, err := bell.New()
	if err != nil {
		b.Fatal(err)
	}
	defer bells.Close()
	guard := NewGuardedGate(cfg)
	cell, endCell := context.WithCancel(context.Background())
	defer endCell()
	node := cfg
	node.Tools, node.Available = nil, []string{"read"}
	node.Gate = wireGate{session: guard, cell: cell}
	node.Bells, node.PollInterval = bells, time.Hour
	srv, err := StartServer(node)
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Stop(context.Background())
	shimRoundTrips(b, dir, cfg.Token, bells)
}

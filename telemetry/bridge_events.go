package telemetry

import "github.com/rs/zerolog"

// BridgeDeny: a session cell's bridge refused a request that failed
// authentication, or a bridge of either mode refused a
// text(), notify() or exception frame whose MAC failed: one event per
// refused request or frame. Per-call runs count refused requests in
// rpc_denied only.
type BridgeDeny struct{}

// DenyAuthentication is the one reason a bridge denial carries.
const DenyAuthentication = "authentication"

func (BridgeDeny) Name() string      { return "coding_agent.python_repl.bridge.deny" }
func (BridgeDeny) lifecycle() string { return "bridge_denied" }

func (BridgeDeny) fields(w fieldWriter) {
	w.measure("count", 1)
	w.label("reason", DenyAuthentication)
}

func (d BridgeDeny) MarshalZerologObject(e *zerolog.Event) { d.fields(logFields{e}) }

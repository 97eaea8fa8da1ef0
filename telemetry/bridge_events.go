package telemetry

import "github.com/rs/zerolog"

// BridgeDeny: a session cell's bridge refused a request that failed
// authentication (bridge.md §8): one event per refused request. Per-call
// runs count such requests in rpc_denied only.
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

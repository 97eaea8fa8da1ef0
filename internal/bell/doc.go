// Package bell owns a bridge's two doorbell pipes (docs/protocol.md,
// "Doorbells"): the request bell, which the shim rings with the name of
// each request it publishes (and with a plain byte after a notify frame),
// and the response bell, which the pump rings with the id of each
// response it publishes. A ring carries no authority; it only says where
// to look, and the bytes of either pipe are untrusted: Decoder turns the
// request bell's into bounded names and plain rings, whatever they are.
//
// It is the runtime's own machinery, with no compatibility promise. pump
// subscribes to the request bell and rings the response bell; the process
// owners (the per-call run and kernelworker) make a Pair for each
// interpreter and hand its child ends to it; registry carries a kernel's
// Pair to the cells that run on it. The package imports only the standard
// library, and never reads a frame or a directory: what a name means is
// the pump's to check.
package bell

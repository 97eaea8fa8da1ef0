// Package bell owns a bridge's two doorbell pipes (docs/protocol.md,
// "Doorbells"): the request bell, which the shim rings after publishing a
// frame, and the response bell, which the pump rings after publishing a
// response. A ring carries no data and no authority; it only says "look
// at the directory".
//
// It is the runtime's own machinery, with no compatibility promise. pump
// subscribes to the request bell and rings the response bell; the process
// owners (the per-call run and kernelworker) make a Pair for each
// interpreter and hand its child ends to it; registry carries a kernel's
// Pair to the cells that run on it. The package imports only the standard
// library, and never reads a frame or a directory.
package bell

// Package frame is the host's side of the kernel frame protocol
// (docs/protocol.md, Part 2, "Frames"): the frame Prefix and its bounds,
// the frame types, the Parser that turns the runner's control stream into
// Frames, and the ProtocolError naming the check a stream failed.
//
// The runner is untrusted: everything it writes on its control fd is fed
// here, and the Parser fails closed, so one bad byte costs the kernel,
// never the host. The package imports only the standard library and knows
// nothing of processes, cells or actors; kernelworker's worker owns a
// Parser per kernel and decides what each frame means in each phase.
//
// It is the runtime's own machinery, with no compatibility promise; only
// kernelworker may import it.
package frame

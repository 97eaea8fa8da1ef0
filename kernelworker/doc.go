// Package kernelworker owns the persistent python3 kernels of session
// mode: how one boots, takes cells and ends, and its worker actor. The
// processes themselves (start, limits, kill, capture, the guard) belong
// to internal/proc, which this package imports.
//
// Kernels (docs/architecture.md, The kernel worker; docs/protocol.md,
// Part 2): Start boots one python3 running the staged
// runner.py in a private workspace, with requests on fd 0, the runner's
// frames on fd 1, its start-up stderr on a pipe of its own and the
// kernel's doorbells on fds 3 and 4, confined first by the sandbox
// Options.Confine gives, if any, then spawns its worker actor. The
// worker owns the process, a frame parser (internal/frame, which holds
// the frame protocol and its fuzz targets), the FIFO of cells, each
// cell's Capture, timer and CPU budget (prlimit before every cell), the
// cancellation escalation (SIGINT, then SIGTERM, then SIGKILL to the
// group) and the cleanup; every Execute gets exactly one CellResult.
// Goroutines between the pipes and the actor only send it messages.
//
// It may call the standard library, golang.org/x/sys/unix, protoactor's
// actor package, zerolog, and of this project internal/proc (the
// processes), its own internal/frame (the frames), privatetmp (staging
// and teardown), internal/bell (the doorbells), shimpy (only the runner
// text) and telemetry. It takes spill files and workspaces through
// functions and never touches a cell's bridge directory, the registry or
// any other actor's state. Nothing here signals a process group whose leader it has
// already reaped.
//
// It is the runtime's own machinery, not an embedder's API: an embedder
// uses executecode, config, tools, telemetry and approval.Approver. Its
// exported names exist for sibling packages and carry no compatibility
// promise; they may change in any release.
package kernelworker

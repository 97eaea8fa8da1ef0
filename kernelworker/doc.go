// Package kernelworker owns python3 processes: how each one is started,
// stopped and listened to, for per-call runs and for the persistent
// kernels of session mode, whose worker actor lives here too.
//
// Starting: a Spawner forks every child from one pinned OS thread, with its
// own session and a parent-death SIGKILL, so a host killed with SIGKILL
// takes its interpreters with it. The child is first this very binary
// (re-executed through /proc/self/exe and recognised in the init of
// internal/reexec), which marks every descriptor beyond python's own close-on-exec
// (whatever the host inherited without it), resets SIGINT to default,
// sets the rlimits of Limits with raw syscalls (RLIMIT_AS last, nothing
// allocated after the first one) and execs python. ResolvePython picks the
// interpreter: the configured one, else the first real python3 on PATH
// that is not a version manager's shim. The parent-death signal does not
// reach python's children (it is cleared on fork), so each Spawner also
// keeps a guard: the same binary re-executed in its own session, told
// every child's session id and the host's staging roots over a pipe,
// which kills every process left in those sessions when the pipe reports
// the host gone, removes what the dead host left in its roots (spills
// excepted), then exits.
//
// Stopping: Kill, Signal and Interrupt signal the whole process group;
// when python itself exits, whatever it left in its group is killed, and
// then every process left in its session (one that moved to a group of
// its own), pass after pass over /proc, before it is reaped and before
// Done: no per-call run or kernel leaves a process behind. A descendant
// that started a session of its own (setsid) escapes (containing it is
// the sandbox mode's job); it can only delay the end of a run by the
// output drain bound.
//
// Listening: a per-call run's stdout and stderr share one pipe. Capture
// sanitizes the stream, scrubs it with the run's Scrubber (host paths and
// token to canonical names, before anything is cut), keeps a bounded copy
// (the first 40 % and a rolling last 60 % of max_output_bytes) and spills
// the rest to a private file up to its cap. A kernel's fd 1 and fd 2
// share one pipe too, so its cells' output is one stream, captured the
// same way. KilledBy and LimitHeadline explain a death for the result.
//
// Kernels (docs/architecture.md, The kernel worker; docs/protocol.md,
// Part 2): Start boots one python3 running the staged
// runner.py in a private workspace, with requests on fd 0, the runner's
// frames on fd 1, its start-up stderr on a pipe of its own and the
// kernel's doorbells on fds 3 and 4, then spawns its worker actor. The
// worker owns the process, the frame Parser, the FIFO of cells, each
// cell's Capture, timer and CPU budget (prlimit before every cell), the
// cancellation escalation (SIGINT, then SIGTERM, then SIGKILL to the
// group) and the cleanup; every Execute gets exactly one CellResult.
// Goroutines between the pipes and the actor only send it messages.
//
// It may call the standard library, golang.org/x/sys/unix, protoactor's
// actor package, zerolog, and of this project privatetmp (staging and
// teardown), pump (only NewBells), shimpy (only the runner text) and
// telemetry. It takes spill files and workspaces through functions and
// never touches a cell's bridge directory, the registry or any other
// actor's state. Nothing here allocates after the launcher's first
// rlimit, and nothing here signals a process group whose leader it has
// already reaped.
//
// It is the runtime's own machinery, not an embedder's API: an embedder
// uses executecode, config, tools, telemetry and approval.Approver. Its
// exported names exist for sibling packages and carry no compatibility
// promise; they may change in any release.
package kernelworker

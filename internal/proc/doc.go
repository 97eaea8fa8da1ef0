// Package proc is the runtime's OS process layer: starting python3 (the
// Spawner, its handshake Bootstrap and the rlimits of Limits), waiting
// for and killing a Process with its group and session, explaining a
// death (KilledBy, LimitHeadline), a kernel's CPU budget, interpreter
// resolution, output Capture with sanitizing and scrubbing, and the guard.
// It is the runtime's own machinery, with no compatibility promise;
// per-call runs and kernelworker's kernels use it alike.
//
// Starting: a Spawner forks every child from one pinned OS thread, with its
// own session and a parent-death SIGKILL, so a host killed with SIGKILL
// takes its interpreters with it. The child is python3 itself: no code of
// the host binary (no init, no main) runs in any process the runtime
// starts. python's first statement is Bootstrap, which blocks on a
// handshake pipe while the host sets the rlimits of Limits on the new pid
// with prlimit(2) and registers it with the guard; released, it resets
// SIGINT to python's KeyboardInterrupt handler, closes every descriptor
// beyond the ones it was given (whatever the host inherited without
// close-on-exec), checks that its parent is the host and closes the
// handshake. A Command with a Program (an MCP server) starts the same
// way and then execs the program from python, so it gets its limits, the
// SIGINT reset and the closed descriptors too. A Command with a Main (a
// per-call script, a kernel's runner) starts generic, python3 FLAGS -c
// Bootstrap, and gets the launcher and then its run over the handshake
// (argv, working directory, the environment's per-run part, its output
// pipes and extra files as SCM_RIGHTS), so the same interpreter can be
// started ahead: KeepWarm keeps a pool of them for one shape, each taken
// whole by one run, replaced in the background, ended when idle and by
// Close; a start that finds none forks one and takes it at once.
// ResolvePython picks the interpreter: the configured one,
// else the first real python3 on PATH that is not a version manager's
// shim. The parent-death signal does not reach python's children (it is
// cleared on fork), so each Spawner also keeps a guard: python3 -I -S
// running guard.py in its own session, told every child's session id and
// the host's staging roots over a pipe, which kills every process left in
// those sessions when the pipe reports the host gone, removes what the
// dead host left in its roots (spills excepted), then exits.
//
// Stopping: Kill, Signal and Interrupt signal the whole process group;
// when python itself exits, whatever it left in its group is killed, and
// then every process left in its session (one that moved to a group of
// its own), pass after pass over /proc, before it is reaped and before
// Done: no per-call run or kernel leaves a process behind. A descendant
// that started a session of its own (setsid) escapes (a confined one
// cannot start one); it can only delay the end of a run by the output
// drain bound.
//
// Listening: a per-call run's stdout and stderr share one pipe. Capture
// sanitizes the stream, scrubs it with the run's Scrubber (host paths and
// token to canonical names, before anything is cut), keeps a bounded copy
// (the first 40 % and a rolling last 60 % of max_output_bytes) and spills
// the rest to a private file up to its cap. A kernel's fd 1 and fd 2
// share one pipe too, so its cells' output is one stream, captured the
// same way. KilledBy and LimitHeadline explain a death for the result.
//
// Confining: a Command with a Sandbox has its Bootstrap confine python
// before the program runs (Landlock rules for the workspace, the tool
// root and the interpreter's own ReadSet, which DeriveReadSet learns from
// the interpreter once; every capability dropped; no_new_privs; a seccomp
// filter for what Landlock does not see), and Start fails with
// ErrSandbox unless python reported all of it in force.
//
// It imports only the standard library, golang.org/x/sys/unix and
// golang.org/x/net/bpf (and its own internal/sweep): no actor, no bridge,
// no other package of the project.
package proc

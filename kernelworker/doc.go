// Package kernelworker owns python3 processes: how each one is started,
// stopped and listened to. Today that is the process layer used by the
// per-call runner; the session kernel worker actor will live here too and
// use the same layer.
//
// Starting: a Spawner forks every child from one pinned OS thread, with its
// own session and a parent-death SIGKILL, so a host killed with SIGKILL
// takes its interpreters with it. The child is first this very binary
// (re-executed through /proc/self/exe and recognised in this package's
// init), which resets SIGINT to default, sets the rlimits of Limits with
// raw syscalls (RLIMIT_AS last, nothing allocated after the first one) and
// execs python. ResolvePython picks the interpreter (bridge.md §1.3 step 6).
//
// Stopping: Kill and Interrupt signal the whole process group; when python
// itself exits, whatever it left in its group is killed before it is
// reaped, so no per-call run or kernel leaves a process behind (design
// ruling 8). A descendant that left the group with its own setsid escapes
// group signals (containing it is the sandbox mode's job); it can only
// delay the end of a run by the output drain bound.
//
// Listening: stdout and stderr share one pipe. Capture keeps a sanitized,
// bounded copy (the first 40 % and a rolling last 60 % of
// max_output_bytes) and spills everything to a private file. KilledBy and
// LimitHeadline explain a death for the result.
//
// It may call the standard library and golang.org/x/sys/unix. It takes
// its spill files through a function (privatetmp makes them) and never
// touches the bridge directory, the registry or any actor state. Nothing
// here allocates after the launcher's first rlimit, and nothing here
// signals a process group whose leader it has already reaped.
package kernelworker

// Package registry is the kernel registry of session mode
// (docs/architecture.md, The kernel registry): one protoactor actor that
// owns which kernel worker serves which Key, the owners (watched session
// actors) of each kernel, the leases of callers using it, generations,
// admission under a strict cap with idle-only least-recently-used eviction,
// idle reaping on its own timer, reset and per-owner forks, owner detach,
// and the stop pipeline of kernels it gives up.
//
// Every state change is one message to the actor, and the actor never
// waits: a worker's status comes back as a continuation of the actor
// (RequestFuture + ReenterAfter), and a kernel's start runs the Starter on
// a goroutine of its own whose result comes back as a message. An acquire
// that must wait for either is pending: acquires of the same key join it
// (one key never starts two kernels), a start in flight holds a slot
// under the cap, a reset of its key waits for it, an owner leaving
// meanwhile takes effect as if it had left right after the answer, and
// StopAll stops the kernel as soon as it is up. Goroutines the package
// starts (a timer callback, a context.AfterFunc for a caller, a start)
// only send the actor a message; they never read or write its state.
//
// Admission and eviction cost O(1) in the number of live kernels: kernels
// without leases sit on an intrusive list in the order their last lease
// ended, and eviction inspects that list from its least-recently-used end.
//
// Owner departure (explicit Detach or the owner actor's Terminated): a
// kernel left without owners is stopped at once. Otherwise the
// registry ends the departing owner's leases, which cancels each lease's
// Context; a worker treats a cell whose Execute.Ctx is done as abandoned
// by its caller: a queued cell leaves the queue and the kernel is kept,
// while an active cell is cancelled and the kernel discarded (and with it
// every cell queued behind it, other owners' included, which are answered
// kernel_discarded). The worker, whose queue is the only exact record of which
// cell is active, thus decides between the two; the registry decides only
// whether a kernel stops because nobody owns it. For this to hold, callers
// must pass Allocation.Lease.Context() (or a context derived from it) as
// the ctx of the cell's kernelworker.Client.Execute.
//
// Stopping a kernel: the entry leaves the live set at once (it no longer
// counts against the cap), the worker is sent kernelworker.Stop and the
// registry waits for its Terminated (it watches every worker from its
// start). A worker still alive after Config.StopTimeout is stopped with
// protoactor's Stop, counted as a stop_failed fallback and retried at
// every reap tick. A sole-owner reset answers only when the old worker is
// gone, or with ErrStopFailed when that cannot be confirmed.
//
// Worker status (docs/architecture.md, Worker status) is asked without waiting, bounded by
// Config.StatusTimeout: on reuse, for the eviction candidate, and for
// every kernel at reap ticks and snapshots (those in parallel); the
// decision is taken on the state when the answer comes. A worker that
// stops while being asked resolves the question at once, since the
// registry watches every worker it started. A worker that terminates on its own is reported
// by the exit report Config.ExitOf returns for it (protoactor's Terminated
// carries no exit reason): a crash reason as session.crash, a self-stop
// after a cancellation as session.stop shutdown, and no report as
// session.crash unknown. An eviction is reported at admission's decision
// (session.evict), its session.stop when the worker is gone.
//
// Callers reach the actor only through Client, whose every call takes a
// context and waits on a reply channel of its own, so a caller that stops
// waiting leaves nothing behind; an Allocation carries the kernel's
// kernelworker.Client, through which cells are sent.
//
// The package calls kernelworker only through the Starter it is given and
// through worker messages (StatusRequest, Stop); it never starts python
// itself, never touches a kernel's process, workspace or bridge, and never
// emits or logs identities: no key fields, digests, paths, PIDs, owner
// identities or generations reach telemetry.
//
// It is the runtime's own machinery, not an embedder's API: an embedder
// uses executecode, config, tools, telemetry and approval.Approver. Its
// exported names exist for sibling packages and carry no compatibility
// promise; they may change in any release.
package registry

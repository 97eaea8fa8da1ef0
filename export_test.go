package executecode

import "time"

// SetReapInterval makes the registry of r look for idle kernels every d
// instead of every minute; call it before the first session.
func SetReapInterval(r *Runtime, d time.Duration) { r.reapInterval = d }

// RegisteredProcesses counts the processes in r's actor system: actors
// and futures that have not been removed (0 before the first session).
func RegisteredProcesses(r *Runtime) int {
	r.mu.Lock()
	tree := r.tree
	r.mu.Unlock()
	if tree == nil {
		return 0
	}
	return tree.RegisteredProcesses()
}

// SetClock makes r's spill reaper read the time from now; call it before
// the first run.
func SetClock(r *Runtime, now func() time.Time) { r.now = now }

// ToolSetDigest is the tool-set digest r's kernel keys carry.
func ToolSetDigest(r *Runtime) string { return r.toolsDigest }

// RequireSandboxABI makes every interpreter of r demand Landlock ABI abi
// of the kernel before it runs, past the check New made: a kernel older
// than the sandbox needs, as the bootstrap meets it.
func RequireSandboxABI(r *Runtime, abi int) { r.sandbox.minABI = abi }

// AddSandboxRule gives every interpreter of r one more read-only rule,
// which the bootstrap must apply or refuse to run.
func AddSandboxRule(r *Runtime, path string) { r.sandbox.extraRead = append(r.sandbox.extraRead, path) }

package executecode

import (
	"path/filepath"

	"github.com/executecode/executecode/config"
	"github.com/executecode/executecode/internal/proc"
	"github.com/executecode/executecode/kernelworker"
)

// warm keeps warm_interpreters interpreters of the runtime's default kind
// started ahead, past python's start-up: per-call runs' in per_call mode,
// kernels' in session mode (docs/architecture.md, Warm interpreters). The
// Spawner owns them; the first starts now, beside the rest of the start.
// A disabled runtime or one without an interpreter warms none: its calls
// report why.
func (r *Runtime) warm() {
	n := r.cfg.WarmInterpreters
	if n <= 0 || !r.cfg.Enabled {
		return
	}
	python, err := r.interpreter()
	if err != nil {
		return
	}
	template := func() (proc.Command, bool) { return r.perCallCommand(python, r.limits()), true }
	if r.cfg.KernelMode == config.Session {
		template = r.kernelTemplate(python)
	}
	r.spawner.KeepWarm(n, r.cfg.KernelIdleTimeout(), template)
}

// kernelTemplate is the command a kernel of the runtime's default key
// starts with (kernelworker.Command), as the registry would make its
// options.
func (r *Runtime) kernelTemplate(python string) func() (proc.Command, bool) {
	cwd, err := filepath.EvalSymlinks(r.rootDir)
	if err != nil {
		cwd = r.rootDir
	}
	opts := kernelworker.Options{Interpreter: python, Cwd: cwd, HelperSource: r.helperSource, Limits: kernelLimits(r.limits())}
	if r.sandbox.on {
		opts.Confine = r.confineKernel
	}
	return func() (proc.Command, bool) { return kernelworker.Command(opts), true }
}

package executecode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/executecode/executecode/config"
	"github.com/executecode/executecode/internal/proc"
	"github.com/executecode/executecode/introspect"
	"github.com/executecode/executecode/privatetmp"
)

// ErrSandbox reports an interpreter that could not be confined as
// sandbox = "landlock" asks: the kernel lacks what the rules need, a rule
// could not be made, or the interpreter could not apply them. Nothing of
// the call ran; the message names what is missing.
var ErrSandbox = proc.ErrSandbox

// SandboxStatus is the protections an interpreter runs under, as
// Details.Sandbox and the snapshot report them.
type SandboxStatus = introspect.Sandbox

// sandboxing is the runtime's sandbox setting: off, or on with the
// protections every interpreter must confine itself with.
type sandboxing struct {
	on   bool
	plan proc.Protections
	// minABI and extraRead are test hooks (export_test.go): a required
	// ABI above the kernel's, and a rule the bootstrap cannot apply.
	minABI    int
	extraRead []string
}

// newSandboxing checks, at New, that the kernel can give what
// sandbox = "landlock" asks, so an operator learns it at start-up and
// not from each call; every interpreter checks again before it runs.
func newSandboxing(cfg config.Config) (sandboxing, error) {
	if cfg.SandboxMode() != config.SandboxLandlock {
		return sandboxing{}, nil
	}
	abi := proc.LandlockABI()
	if abi < proc.MinLandlockABI {
		why := fmt.Sprintf("kernel Landlock ABI %d, need at least %d", abi, proc.MinLandlockABI)
		if abi == 0 {
			why = "Landlock is not available in this kernel (not built in, disabled at boot, or blocked by a container's seccomp profile)"
		}
		return sandboxing{}, fmt.Errorf("%w: sandbox = %q: %w: %s", ErrConfig, cfg.Sandbox, ErrSandbox, why)
	}
	if err := proc.CheckSeccomp(); err != nil {
		return sandboxing{}, fmt.Errorf("%w: sandbox = %q: %w", ErrConfig, cfg.Sandbox, err)
	}
	return sandboxing{on: true, plan: proc.Planned(abi)}, nil
}

// status is what the snapshot reports: the protections every new
// interpreter gets, none when the sandbox is off.
func (s sandboxing) status() SandboxStatus { return statusOf(s.plan) }

func statusOf(p proc.Protections) SandboxStatus {
	return SandboxStatus{ABI: p.ABI, FS: p.FS, Net: p.Net, Scoped: p.Scoped, Seccomp: p.Seccomp}
}

// confine is the sandbox of one interpreter of python: read-only its own
// read set and the tool root, read-write only write (its workspace, which
// holds its bridges), with home as HOME and a fresh directory in home as
// TMPDIR. Nil when the sandbox is off.
//
// It refuses a read set or tool root that would expose the staging
// roots: every other run's workspace, bridge and spill lies there, and a
// PYTHONPATH entry of /tmp, or a tool root of /, would hand them all to
// the script.
func (r *Runtime) confine(ctx context.Context, python, write, home string) (*proc.Sandbox, error) {
	if !r.sandbox.on {
		return nil, nil
	}
	rs, err := r.spawner.DeriveReadSet(ctx, python, os.Environ())
	if err != nil {
		return nil, err
	}
	read := append(slices.Clone(rs.Read), r.rootDir)
	read = append(read, r.sandbox.extraRead...)
	for _, private := range r.privateDirs() {
		for _, p := range slices.Concat(read, rs.Exec, rs.Optional) {
			// Landlock binds the resolved directory.
			real, err := filepath.EvalSymlinks(p)
			if err != nil {
				real = p
			}
			if proc.Within(private, real) {
				what := "the interpreter's read set entry " + p
				if p == r.rootDir {
					what = "the tool root " + p
				}
				return nil, fmt.Errorf("%w: %s contains %s, where every run's workspace lies; "+
					"choose a tool root, TMPDIR or PYTHONPATH that keeps them apart", ErrSandbox, what, private)
			}
		}
	}
	tmp, err := privatetmp.ReserveDir(home, "tmp")
	if err != nil {
		return nil, fmt.Errorf("%w: temporary directory: %w", ErrSandbox, err)
	}
	return &proc.Sandbox{
		ABI:        r.sandbox.plan.ABI,
		MinABI:     r.sandbox.minABI,
		Read:       read,
		Exec:       rs.Exec,
		Optional:   rs.Optional,
		Write:      []string{write},
		WriteFiles: []string{os.DevNull},
		Home:       home,
		Tmp:        tmp,
	}, nil
}

// privateDirs are the directories no interpreter may read: the staging
// roots (resolved, as Landlock sees them) and the directory spill roots
// are made in.
func (r *Runtime) privateDirs() []string {
	r.mu.Lock()
	rs := r.roots
	r.mu.Unlock()
	var out []string
	add := func(p string) {
		if p == "" {
			return
		}
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		out = append(out, p)
	}
	if rs.work != nil {
		// Its parent too: other runtimes' roots lie beside it.
		add(rs.work.Path())
		add(filepath.Dir(rs.work.Path()))
	}
	if rs.spill != nil {
		add(rs.spill.Path())
	}
	add(rs.spillDir)
	return out
}

// sandboxError is the call's error for an interpreter that could not be
// confined: ErrSandbox with what is missing, host paths scrubbed.
func sandboxError(err error, scrub func(string) string) error {
	msg := err.Error()
	if i := strings.Index(msg, ErrSandbox.Error()); i >= 0 {
		msg = msg[i+len(ErrSandbox.Error()):]
	}
	msg = strings.TrimPrefix(msg, ": ")
	if scrub != nil {
		msg = scrub(msg)
	}
	return fmt.Errorf("%w: %s", ErrSandbox, msg)
}

// isSandboxError says whether err is an interpreter that could not be
// confined.
func isSandboxError(err error) bool { return errors.Is(err, ErrSandbox) }

// sandboxKey is the sandbox part of a kernel key: "" when off, so keys
// of unconfined kernels keep their digests.
func (r *Runtime) sandboxKey() string {
	if !r.sandbox.on {
		return ""
	}
	return config.SandboxLandlock
}

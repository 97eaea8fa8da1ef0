package actors

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/executecode/executecode/approval"
	"github.com/executecode/executecode/internal/proc"
	"github.com/executecode/executecode/kernelworker"
	"github.com/executecode/executecode/privatetmp"
	"github.com/executecode/executecode/registry"
	"github.com/executecode/executecode/shimpy"
)

// crash is the fault injected into the registry.
type crash struct{}

func realPython(t *testing.T) string {
	t.Helper()
	p, err := proc.ResolvePython("")
	if err != nil {
		t.Skip("no python3: " + err.Error())
	}
	return p
}

// startTree runs a real tree whose registry panics on crash{}; its kernels'
// workspaces live under the returned root.
func startTree(t *testing.T) (*Tree, string) {
	t.Helper()
	orig := registryProps
	registryProps = func(cfg registry.Config) *actor.Props {
		return registry.Props(cfg).Configure(actor.WithReceiverMiddleware(func(next actor.ReceiverFunc) actor.ReceiverFunc {
			return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
				if _, ok := env.Message.(*crash); ok {
					panic("injected registry crash")
				}
				next(c, env)
			}
		}))
	}
	t.Cleanup(func() { registryProps = orig })
	root := t.TempDir()
	spawner := proc.NewSpawner()
	tree, err := Start(registry.Config{MaxLiveKernels: 4, IdleTimeout: time.Hour, ReapInterval: time.Minute},
		kernelworker.Options{
			Spawner:   spawner,
			Workspace: func() (string, error) { return privatetmp.ReserveDir(root, "python-kernel") },
			Spill:     func() (*os.File, error) { return privatetmp.ReserveFile(root, privatetmp.SpillPrefix) },
		}, approval.Config{})
	require.NoError(t, err)
	t.Cleanup(spawner.Close)
	return tree, root
}

func acquire(t *testing.T, tree *Tree, owner *registry.Owner, session string) registry.Allocation {
	t.Helper()
	key, err := registry.NewKey(session, "main", t.TempDir(), realPython(t), nil)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a, err := tree.Registry.Acquire(ctx, registry.AcquireRequest{
		Key: key, Owner: owner, Caller: context.Background(), MaxLiveKernels: 4, IdleTimeout: time.Hour,
		Worker: registry.WorkerOptions{InterpreterConfigured: realPython(t), HelperSource: shimpy.RenderModule(nil, 0)},
	})
	require.NoError(t, err)
	return a
}

func attach(t *testing.T, tree *Tree) *registry.Owner {
	t.Helper()
	o, err := tree.Registry.Attach(context.Background())
	require.NoError(t, err)
	return o
}

// runnerPIDs lists the live python processes running a kernel runner from
// a workspace under root (other packages' tests run kernels at the same
// time).
func runnerPIDs(t *testing.T, root string) []int {
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmdline), root+"/python-kernel") && strings.Contains(string(cmdline), shimpy.RunnerName) && !zombie(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// waitRunners waits until n kernel runners show under root: a kernel's
// process is spawned before Acquire answers, but /proc may still show it
// mid-exec (between the launcher and python) for a moment after.
func waitRunners(t *testing.T, root string, n int) []int {
	t.Helper()
	var live []int
	require.Eventually(t, func() bool {
		live = runnerPIDs(t, root)
		return len(live) == n
	}, 10*time.Second, 5*time.Millisecond, "%d kernels run", n)
	return live
}

func TestRegistryCrashTakesEveryKernelWithIt(t *testing.T) {
	tree, root := startTree(t)
	owner := attach(t, tree)
	acquire(t, tree, owner, "a")
	acquire(t, tree, owner, "b")
	live := waitRunners(t, root, 2)

	tree.system.Root.Send(tree.registry, &crash{})
	assert.Eventually(t, func() bool {
		for _, pid := range live {
			if unix.Kill(pid, 0) == nil && !zombie(pid) {
				return false
			}
		}
		return true
	}, 10*time.Second, 20*time.Millisecond, "no interpreter outlives its registry")

	// The restarted registry serves again, from an empty state.
	acquire(t, tree, owner, "c")
	require.NoError(t, tree.Registry.Detach(context.Background(), owner))
	require.NoError(t, tree.Shutdown(context.Background()))
}

func TestShutdownStopsEveryKernel(t *testing.T) {
	tree, root := startTree(t)
	owner := attach(t, tree)
	acquire(t, tree, owner, "a")
	live := waitRunners(t, root, 1)
	require.NoError(t, tree.Shutdown(context.Background()))
	for _, pid := range live {
		assert.True(t, unix.Kill(pid, 0) != nil || zombie(pid), "kernel %d still runs after shutdown", pid)
	}
}

func zombie(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return true
	}
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && len(b) > i+2 && b[i+2] == 'Z'
}

// A kernel whose boot is stuck holds neither the registry nor the workers
// supervisor: queries answer within 10 ms, and another key's kernel boots
// meanwhile.
func TestAStuckKernelBootHoldsNothingElse(t *testing.T) {
	root := t.TempDir()
	entered, gate := make(chan struct{}, 1), make(chan struct{})
	var once sync.Once
	spawner := proc.NewSpawner()
	t.Cleanup(spawner.Close)
	tree, err := Start(registry.Config{MaxLiveKernels: 4, IdleTimeout: time.Hour, ReapInterval: time.Minute},
		kernelworker.Options{
			Spawner: spawner,
			Workspace: func() (string, error) {
				first := false
				once.Do(func() { first = true })
				if first {
					entered <- struct{}{}
					select {
					case <-gate:
					case <-time.After(5 * time.Second):
					}
				}
				return privatetmp.ReserveDir(root, "python-kernel")
			},
			Spill: func() (*os.File, error) { return privatetmp.ReserveFile(root, privatetmp.SpillPrefix) },
		}, approval.Config{})
	require.NoError(t, err)
	ctx := context.Background()
	owner := attach(t, tree)
	slow := make(chan registry.Allocation, 1)
	go func() { slow <- acquire(t, tree, owner, "slow") }()
	<-entered

	// A scheduler's hiccup on a loaded machine can exceed the bound once,
	// a blocked mailbox every time: the bound holds for the best of five.
	const bound = 10 * time.Millisecond
	timed := func(what string, ask func()) {
		best := time.Duration(1<<63 - 1)
		for range 5 {
			t0 := time.Now()
			ask()
			best = min(best, time.Since(t0))
		}
		t.Logf("%s: %v", what, best)
		assert.Less(t, best, bound, what+" while a boot is stuck")
	}
	timed("registry snapshot", func() {
		s, err := tree.Registry.Snapshot(ctx)
		require.NoError(t, err)
		assert.Equal(t, 1, s.Phases["starting"])
	})
	timed("introspect snapshot", func() {
		s, err := tree.Introspect.Snapshot(ctx)
		require.NoError(t, err)
		assert.Equal(t, 1, s.Capacity.Live)
	})
	timed("attach and detach", func() {
		o := attach(t, tree)
		require.NoError(t, tree.Registry.Detach(ctx, o))
	})
	fast := acquire(t, tree, owner, "fast")
	assert.Equal(t, uint64(2), fast.Generation)
	select {
	case <-slow:
		assert.Fail(t, "the stuck boot finished early")
	default:
	}

	close(gate)
	assert.Equal(t, uint64(1), (<-slow).Generation)
	waitRunners(t, root, 2)
	require.NoError(t, tree.Registry.StopAll(ctx))
	require.NoError(t, tree.Registry.Detach(ctx, owner))
	require.NoError(t, tree.Shutdown(ctx))
	assert.Empty(t, runnerPIDs(t, root))
}

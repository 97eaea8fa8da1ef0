package actors

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
			Workspace: func() (string, error) { return privatetmp.ReserveDir(root, "lemon-pyrepl") },
			Spill:     func() (*os.File, error) { return privatetmp.ReserveFile(root, privatetmp.SpillPrefix) },
		}, approval.Config{})
	require.NoError(t, err)
	t.Cleanup(spawner.Close)
	return tree, root
}

func acquire(t *testing.T, tree *Tree, owner *actor.PID, session string) registry.Allocation {
	t.Helper()
	key, err := registry.NewKey(session, "main", t.TempDir(), realPython(t), nil)
	require.NoError(t, err)
	res, err := tree.System.Root.RequestFuture(tree.Registry, &registry.Acquire{
		Key: key, Owner: owner, Caller: context.Background(), MaxLiveKernels: 4, IdleTimeout: time.Hour,
		Worker: registry.WorkerOptions{InterpreterConfigured: realPython(t), HelperSource: shimpy.RenderModule(nil, 0)},
	}, 20*time.Second).Result()
	require.NoError(t, err)
	reply := res.(*registry.AcquireReply)
	require.NoError(t, reply.Err)
	return reply.Allocation
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
		if err == nil && strings.Contains(string(cmdline), root+"/lemon-pyrepl") && strings.Contains(string(cmdline), shimpy.RunnerName) && !zombie(pid) {
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
	owner := tree.NewOwner()
	acquire(t, tree, owner.PID, "a")
	acquire(t, tree, owner.PID, "b")
	live := waitRunners(t, root, 2)

	tree.System.Root.Send(tree.Registry, &crash{})
	assert.Eventually(t, func() bool {
		for _, pid := range live {
			if unix.Kill(pid, 0) == nil && !zombie(pid) {
				return false
			}
		}
		return true
	}, 10*time.Second, 20*time.Millisecond, "no interpreter outlives its registry")

	// The restarted registry serves again, from an empty state.
	acquire(t, tree, owner.PID, "c")
	owner.Stop()
	require.NoError(t, tree.Shutdown(context.Background()))
}

func TestShutdownStopsEveryKernel(t *testing.T) {
	tree, root := startTree(t)
	owner := tree.NewOwner()
	acquire(t, tree, owner.PID, "a")
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

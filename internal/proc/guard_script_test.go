package proc

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/executecode/executecode/internal/privfs"
	"github.com/executecode/executecode/internal/proctest"
)

// guardCall runs guard.py's definitions, without its main, in python3 -I
// -S as the guard runs, evaluates expr with the arguments in args and
// returns its value, JSON-decoded into out.
func guardCall(t *testing.T, out any, expr string, args ...string) {
	t.Helper()
	prog := "import json, sys\nns = {'__name__': 'guard_test'}\nexec(compile(sys.argv[1], 'guard.py', 'exec'), ns)\n" +
		"args = sys.argv[2:]\nprint(json.dumps(eval(" + pyQuote(expr) + ", ns, {'args': args})))\n"
	cmd := exec.Command(proctest.Python(t), append([]string{"-I", "-S", "-c", prog, guardSource}, args...)...)
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", b)
	require.NoError(t, json.Unmarshal(b, out), "%s", b)
}

func TestGuardAcceptsOnlyWellFormedLines(t *testing.T) {
	root := "/tmp/execute-code-private-abc\nwith newline"
	rootLine := string(appendGuardRoot(nil, root))
	for _, tc := range []struct {
		line string
		want []any // op and value; nil for a malformed line
	}{
		{"+1234", []any{"+", 1234.0}},
		{"-99", []any{"-", 99.0}},
		{"!77", []any{"!", 77.0}},
		{rootLine[:len(rootLine)-1], []any{"r", root}},
		{"q", []any{"q", nil}},
		{"", nil},
		{"+", nil},
		{"*12", nil},
		{"+12x", nil},
		{"+-12", nil},
		{"++12", nil},
		{"+1", nil}, // init's session is never ours
		{"+0", nil},
		{"+99999999999999999999", nil},
		{"r" + hex.EncodeToString([]byte("relative/execute-code-private-x")), nil},
		{"r" + hex.EncodeToString([]byte("/tmp/../etc")), nil},
		{"r" + hex.EncodeToString([]byte("/tmp/x/")), nil},
		{"r" + hex.EncodeToString([]byte("/tmp/x\x00y")), nil},
		{"r/tmp/unquoted", nil},
		{"rABCD", nil},
		{"r0", nil},
		{"r", nil},
		{"qq", nil},
	} {
		var got []any
		guardCall(t, &got, "(lambda r: r and [r[0].decode(), r[1].decode('utf-8', 'replace') if isinstance(r[1], bytes) else r[1]])(parse_line(args[0].encode()))", tc.line)
		assert.Equal(t, tc.want, got, "%q", tc.line)
	}
}

func TestGuardLinesAreWhatTheGuardReads(t *testing.T) {
	b := appendGuardLine(appendGuardLine(nil, guardAdd, 4242), guardForget, 17)
	b = appendGuardRoot(b, "/dev/shm/execute-code-private-x")
	assert.Equal(t, "+4242\n-17\nr"+hex.EncodeToString([]byte("/dev/shm/execute-code-private-x"))+"\n", string(b))
}

// deadRoot plants a staging root owned by pid holding a workspace.
func deadRoot(t *testing.T, pid int) (tmp, root string) {
	t.Helper()
	tmp = t.TempDir()
	root = filepath.Join(tmp, privfs.RootPrefix+"-AAAAAAAAAA")
	require.NoError(t, os.Mkdir(root, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(root, privfs.MarkerName), privfs.FormatMarker("node", pid), 0o600))
	ws := filepath.Join(root, "exec-code-BBBBBBBBBB")
	require.NoError(t, os.MkdirAll(filepath.Join(ws, "rpc"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "exec_tools.py"), []byte("TOKEN = 'secret'"), 0o600))
	return tmp, root
}

// removeDeadRoot runs the guard's removal of root for the dead host pid
// with limit visits: "gone", "kept" or "refused".
func removeDeadRoot(t *testing.T, root string, pid, limit int) string {
	t.Helper()
	var got string
	guardCall(t, &got, "remove_dead_root(os.fsencode(args[0]), int(args[1]), int(args[2]))", root, strconv.Itoa(pid), strconv.Itoa(limit))
	return got
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestGuardRemovesADeadRootWhole(t *testing.T) {
	tmp, root := deadRoot(t, 4242)
	assert.Equal(t, "gone", removeDeadRoot(t, root, 4242, 1000))
	assert.Empty(t, dirNames(t, tmp))
}

func TestGuardKeepsSpillsAndTheMarker(t *testing.T) {
	_, root := deadRoot(t, 4242)
	spill := filepath.Join(root, privfs.SpillPrefix+"-CCCCCCCCCC")
	require.NoError(t, os.WriteFile(spill, []byte("full output"), 0o600))
	// Named like a spill, but a directory: removed.
	require.NoError(t, os.Mkdir(filepath.Join(root, privfs.SpillPrefix+"-DDDDDDDDDD"), 0o700))
	assert.Equal(t, "kept", removeDeadRoot(t, root, 4242, 1000))
	assert.ElementsMatch(t, []string{privfs.MarkerName, filepath.Base(spill)}, dirNames(t, root))
}

// A FIFO planted in a dead root is unlinked, never opened.
func TestGuardRemovesAPlantedFIFO(t *testing.T) {
	tmp, root := deadRoot(t, 4242)
	require.NoError(t, unix.Mkfifo(filepath.Join(root, "exec-code-BBBBBBBBBB", "rpc", "req-1.json"), 0o600))
	require.NoError(t, unix.Mkfifo(filepath.Join(root, privfs.SpillPrefix+"-FFFFFFFFFF"), 0o600))
	assert.Equal(t, "gone", removeDeadRoot(t, root, 4242, 1000))
	assert.Empty(t, dirNames(t, tmp))
}

func TestGuardNeverFollowsALinkInADeadRoot(t *testing.T) {
	_, root := deadRoot(t, 4242)
	outside := t.TempDir()
	victim := filepath.Join(outside, "keep.txt")
	require.NoError(t, os.WriteFile(victim, []byte("keep"), 0o600))
	require.NoError(t, os.Symlink(outside, filepath.Join(root, "exec-code-link")))
	require.NoError(t, os.Symlink(victim, filepath.Join(root, privfs.SpillPrefix+"-EEEEEEEEEE")))
	require.NoError(t, os.Symlink(outside, filepath.Join(root, "exec-code-BBBBBBBBBB", "rpc", "out")))
	assert.Equal(t, "gone", removeDeadRoot(t, root, 4242, 1000), "links are unlinked, so nothing is left")
	assert.FileExists(t, victim, "a link's target is never touched")
}

func TestGuardRefusesWhatIsNotTheDeadHostsRoot(t *testing.T) {
	t.Run("another owner", func(t *testing.T) {
		_, root := deadRoot(t, 4242)
		assert.Equal(t, "refused", removeDeadRoot(t, root, 4243, 1000))
		assert.DirExists(t, filepath.Join(root, "exec-code-BBBBBBBBBB"))
	})
	t.Run("a symlinked root", func(t *testing.T) {
		_, real := deadRoot(t, 4242)
		link := filepath.Join(t.TempDir(), privfs.RootPrefix+"-LLLLLLLLLL")
		require.NoError(t, os.Symlink(real, link))
		assert.Equal(t, "refused", removeDeadRoot(t, link, 4242, 1000))
		assert.DirExists(t, filepath.Join(real, "exec-code-BBBBBBBBBB"))
	})
	t.Run("a loose mode", func(t *testing.T) {
		_, root := deadRoot(t, 4242)
		require.NoError(t, os.Chmod(root, 0o755))
		assert.Equal(t, "refused", removeDeadRoot(t, root, 4242, 1000))
		assert.DirExists(t, filepath.Join(root, "exec-code-BBBBBBBBBB"))
	})
	t.Run("a linked marker", func(t *testing.T) {
		_, root := deadRoot(t, 4242)
		other := filepath.Join(t.TempDir(), "marker")
		require.NoError(t, os.WriteFile(other, privfs.FormatMarker("node", 4242), 0o600))
		require.NoError(t, os.Remove(filepath.Join(root, privfs.MarkerName)))
		require.NoError(t, os.Symlink(other, filepath.Join(root, privfs.MarkerName)))
		assert.Equal(t, "refused", removeDeadRoot(t, root, 4242, 1000))
		assert.DirExists(t, filepath.Join(root, "exec-code-BBBBBBBBBB"))
	})
	t.Run("a FIFO for a marker", func(t *testing.T) {
		_, root := deadRoot(t, 4242)
		require.NoError(t, os.Remove(filepath.Join(root, privfs.MarkerName)))
		require.NoError(t, unix.Mkfifo(filepath.Join(root, privfs.MarkerName), 0o600))
		assert.Equal(t, "refused", removeDeadRoot(t, root, 4242, 1000), "never opened, so never blocked on")
		assert.DirExists(t, filepath.Join(root, "exec-code-BBBBBBBBBB"))
	})
	t.Run("a malformed marker", func(t *testing.T) {
		_, root := deadRoot(t, 4242)
		require.NoError(t, os.WriteFile(filepath.Join(root, privfs.MarkerName), []byte("node\n4242\nextra\n"), 0o600))
		assert.Equal(t, "refused", removeDeadRoot(t, root, 4242, 1000))
		assert.DirExists(t, filepath.Join(root, "exec-code-BBBBBBBBBB"))
	})
	t.Run("not a staging root name", func(t *testing.T) {
		tmp, _ := deadRoot(t, 4242)
		assert.Equal(t, "refused", removeDeadRoot(t, tmp, 4242, 1000))
		assert.Equal(t, "refused", removeDeadRoot(t, tmp+"/x/../"+privfs.RootPrefix+"-AAAAAAAAAA", 4242, 1000))
	})
}

// A root the budget cannot empty keeps its marker, so a later start still
// knows it for a dead process's root.
func TestGuardOutOfBudgetKeepsTheMarker(t *testing.T) {
	_, root := deadRoot(t, 4242)
	for i := range 50 {
		require.NoError(t, os.WriteFile(filepath.Join(root, "exec-code-BBBBBBBBBB", "f"+strconv.Itoa(i)), nil, 0o600))
	}
	assert.Equal(t, "kept", removeDeadRoot(t, root, 4242, 10))
	assert.FileExists(t, filepath.Join(root, privfs.MarkerName))
}

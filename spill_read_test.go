package executecode_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/config"
)

// floodScript prints more than the rigs' max_output_bytes, so the run spills.
const floodScript = "for i in range(2000):\n    print('line', i)\n"

var spillMarker = regexp.MustCompile(`\[Full output saved to: (<spill>/spill-[A-Za-z0-9]+)\]`)

// spilled runs the flood as o and returns the placeholder its result names.
func (r *rig) spilled(o *executecode.Owner) (placeholder, host string) {
	r.t.Helper()
	res := r.run(o, floodScript)
	m := spillMarker.FindStringSubmatch(res.Text())
	require.NotNil(r.t, m, "the result names its spill by placeholder: %s", res.Text())
	require.NotEmpty(r.t, res.Details.FullOutputPath)
	assert.NotContains(r.t, res.Text(), res.Details.FullOutputPath, "the model never sees the host path")
	assert.Equal(r.t, filepath.Base(res.Details.FullOutputPath), strings.TrimPrefix(m[1], "<spill>/"))
	return m[1], res.Details.FullOutputPath
}

// readBack is a script that reads path (with read's keyword arguments)
// and shows what read answered, or the ToolError it raised.
func readBack(path string, kw ...string) string {
	args := append([]string{fmt.Sprintf("%q", path)}, kw...)
	return fmt.Sprintf("try:\n    text(read(%s))\nexcept ToolError as e:\n    text('ToolError: ' + str(e))\n", strings.Join(args, ", "))
}

func spillRig(t *testing.T, mode config.Mode) *rig {
	return newRig(t, withCfg(func(c *config.Config) { c.KernelMode = mode; c.MaxOutputBytes = 1000 }))
}

// A later call reads its owner's spill back through the placeholder the
// result showed, with line numbers and offsets as for any file.
func TestASpillIsReadBackThroughItsPlaceholder(t *testing.T) {
	for _, mode := range []config.Mode{config.PerCall, config.Session} {
		t.Run(string(mode), func(t *testing.T) {
			r := spillRig(t, mode)
			var o *executecode.Owner
			if mode == config.Session {
				o = r.attach("s1")
			}
			ph, _ := r.spilled(o)
			res := r.run(o, readBack(ph, "offset=1500", "limit=2"))
			assert.Equal(t, "  1500\tline 1499\n  1501\tline 1500\n[... 499 more lines; use offset=1502 to continue]", res.Blocks[0], res.Text())
		})
	}
}

// Spills are the owner's: another session, and a call without one, get
// the same answer as for a name that was never handed out.
func TestAnotherOwnersSpillIsNotReadable(t *testing.T) {
	r := spillRig(t, config.Session)
	ph, _ := r.spilled(r.attach("s1"))
	for name, o := range map[string]*executecode.Owner{"other session": r.attach("s2"), "no owner": nil} {
		res := r.run(o, readBack(ph))
		assert.Equal(t, "ToolError: "+ph+": not a spill file of this session", res.Blocks[0], name)
	}
	res := r.run(r.attach("s1"), readBack("<spill>/spill-AAAAAAAAAA"))
	assert.Equal(t, "ToolError: <spill>/spill-AAAAAAAAAA: not a spill file of this session", res.Blocks[0])

	// Per-call spills of owner-less calls are not a session's either.
	pc := spillRig(t, config.PerCall)
	ph2, _ := pc.spilled(nil)
	res = r.run(r.attach("s1"), readBack(ph2))
	assert.Contains(t, res.Blocks[0], "not a spill file of this session")
}

// Every other path under the placeholder is refused by name, and nothing
// after it reaches the tool root or the filesystem.
func TestSpillPathsThatAreNotASpillNameAreRefused(t *testing.T) {
	r := spillRig(t, config.PerCall)
	writeFile(t, r.root, "x", "secret\n")
	ph, _ := r.spilled(nil)
	name := strings.TrimPrefix(ph, "<spill>/")
	for _, p := range []string{
		"<spill>", "<spill>/", "<spill>x", "<spill>/../x", "<spill>/" + name + "/../x",
		"<spill>/" + name + "/", "<spill>//etc/passwd", "<spill>/etc/passwd", "<spill>/spill-",
		"<spill>/" + name + "\x00", "<spill>/./" + name, "<spill>/x",
	} {
		res := r.run(nil, readBack(p))
		want := fmt.Sprintf("ToolError: %q is not a spill path: use <spill>/spill-… as the result names it", p)
		assert.Equal(t, want, res.Blocks[0], "path %q", p)
	}
}

// What a script may plant where its spill was (it can find the staging
// root: its own script file is there) is refused, never followed, and a
// FIFO does not hang the read.
func TestAPlantedSpillIsRefused(t *testing.T) {
	r := spillRig(t, config.PerCall)
	secret := writeFile(t, t.TempDir(), "secret", "the host's secret\n")
	cases := map[string]struct {
		plant func(host string)
		want  string
	}{
		"symlink": {func(h string) { require.NoError(t, os.Symlink(secret, h)) }, "refused: a symlink stands where the spill file was"},
		"fifo":    {func(h string) { require.NoError(t, syscall.Mkfifo(h, 0o600)) }, "refused: the spill file was replaced"},
		"file":    {func(h string) { require.NoError(t, os.WriteFile(h, []byte("forged\n"), 0o600)) }, "refused: the spill file was replaced"},
		"removed": {func(string) {}, "the spill file was removed (spills are kept for 24 hours)"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			ph, host := r.spilled(nil)
			// The script itself removes its spill: it runs as the host's user.
			res := r.run(nil, fmt.Sprintf(`import os, glob
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
hits = [p for p in glob.glob(os.path.join(root, '**', %q), recursive=True)]
assert hits, root
for p in hits:
    os.remove(p)
`, filepath.Base(host)))
			require.Zero(t, *res.Details.ExitCode, res.Text())
			require.NoFileExists(t, host)
			c.plant(host)
			res = r.run(nil, readBack(ph))
			assert.Equal(t, "ToolError: "+ph+": "+c.want, res.Blocks[0])
			_ = os.Remove(host)
		})
	}
}

// A spill grown to 1 GiB reads within read's usual caps.
func TestAHugeSpillReadsWithinReadsCaps(t *testing.T) {
	r := spillRig(t, config.PerCall)
	ph, host := r.spilled(nil)
	require.NoError(t, os.Truncate(host, 1<<30))
	res := r.run(nil, readBack(ph, "limit=3"))
	assert.Equal(t, "     1\tline 0\n     2\tline 1\n     3\tline 2\n[... 1998 more lines; use offset=4 to continue]", res.Blocks[0])
	_ = os.Remove(host)
}

// A co-owner shares the kernel and all its state, and so its spills.
func TestACoOwnerReadsTheSessionsSpill(t *testing.T) {
	r := spillRig(t, config.Session)
	ph, _ := r.spilled(r.attach("s1"))
	res := r.run(r.coAttach("s1"), readBack(ph, "limit=1"))
	assert.Equal(t, "     1\tline 0\n[... 1999 more lines; use offset=2 to continue]", res.Blocks[0], res.Text())
}

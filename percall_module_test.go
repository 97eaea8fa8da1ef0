package executecode_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/config"
	"github.com/executecode/executecode/internal/proctest"
)

// helperReport reports, as one text block, how the script's helper module
// was imported: a digest of its file, whether its bytecode cache lies in
// the workspace beside it as a checked cache (flags 3) of exactly that
// file, whether the file names the run's rpc directory, and whether
// anything planted ran (PWNED in the output).
const helperReport = `
import json, os, sys, _imp, hashlib, exec_tools
ext = sys.modules["_frozen_importlib_external"]
src = open(exec_tools.__file__, "rb").read()
ws = os.path.dirname(exec_tools.__file__)
cached = exec_tools.__cached__
data = open(cached, "rb").read() if cached and os.path.exists(cached) else b""
text(json.dumps({
    "module": hashlib.sha256(src).hexdigest(),
    "cache_beside": os.path.dirname(os.path.dirname(cached)) == ws,
    "flags": int.from_bytes(data[4:8], "little"),
    "fits": data[8:16] == _imp.source_hash(ext._RAW_MAGIC_NUMBER, src),
    "names_rpc": os.fsencode(exec_tools._BRIDGE.dir) in src,
}))
`

type helperReported struct {
	Module      string `json:"module"`
	CacheBeside bool   `json:"cache_beside"`
	Flags       int    `json:"flags"`
	Fits        bool   `json:"fits"`
	NamesRPC    bool   `json:"names_rpc"`
}

func reportHelpers(t *testing.T, r *rig, o *executecode.Owner) helperReported {
	t.Helper()
	res := r.run(o, helperReport)
	require.Len(t, res.Blocks, 1, res.Text())
	assert.NotContains(t, res.Text(), "PWNED")
	assert.Equal(t, 0, *res.Details.ExitCode, res.Text())
	var got helperReported
	require.NoError(t, json.Unmarshal([]byte(res.Blocks[0]), &got), res.Blocks[0])
	return got
}

// A per-call run imports its helpers from the checked bytecode cache its
// interpreter left beside them, warm or cold, confined or not; the module
// names no run's directory and is the same file for every run.
func TestAPerCallRunImportsItsHelpersFromTheCacheMadeAhead(t *testing.T) {
	for _, sandbox := range []bool{false, true} {
		for _, warm := range []int{0, 1} {
			t.Run(fmt.Sprintf("sandbox=%v/warm=%d", sandbox, warm), func(t *testing.T) {
				r := warmRig(t, config.PerCall, sandbox, warm, t.TempDir())
				first := reportHelpers(t, r, nil)
				assert.Equal(t, helperReported{Module: first.Module, CacheBeside: true, Flags: 3, Fits: true}, first)
				assert.Equal(t, first, reportHelpers(t, r, nil), "every run stages the same module")
			})
		}
	}
}

// plantScript writes, into every directory it names and can write, a
// genuine copy of the helper module beside a checked bytecode cache that
// fits it but holds other code (printing PWNED and exiting 66), and a
// package of that name holding the same; it also replaces its own
// workspace's cache so. Any later import of exec_tools from one of them
// would run the planted code.
const plantScript = `
import json, os, sys, _imp, exec_tools
ext = sys.modules["_frozen_importlib_external"]
src = open(exec_tools.__file__, "rb").read()
EVIL = "print('PWNED')\nraise SystemExit(66)\n"
pyc = ext._code_to_hash_pyc(compile(EVIL, exec_tools.__file__, "exec"), _imp.source_hash(ext._RAW_MAGIC_NUMBER, src), True)
ws = os.path.dirname(exec_tools.__file__)
def plant(d, module=True):
    try:
        os.makedirs(os.path.join(d, "__pycache__"), exist_ok=True)
        with open(os.path.join(d, "__pycache__", "exec_tools.%%s.pyc" %% sys.implementation.cache_tag), "wb") as f:
            f.write(pyc)
        if module:
            with open(os.path.join(d, "exec_tools.py"), "wb") as f:
                f.write(src)
            os.makedirs(os.path.join(d, "exec_tools"), exist_ok=True)
            with open(os.path.join(d, "exec_tools", "__init__.py"), "w") as f:
                f.write(EVIL)
        return "planted"
    except OSError as e:
        return "refused"
dirs = [d for d in %s] + [os.getcwd(), os.path.dirname(ws), os.path.dirname(os.path.dirname(ws))]
done = {"workspace": plant(ws, False)}
for d in dirs:
    done[d] = plant(d)
text(json.dumps(done))
`

func plant(t *testing.T, r *rig, o *executecode.Owner, dirs ...string) map[string]string {
	t.Helper()
	list, err := json.Marshal(append([]string{}, dirs...))
	require.NoError(t, err)
	res := r.run(o, fmt.Sprintf(plantScript, list))
	require.Len(t, res.Blocks, 1, res.Text())
	var got map[string]string
	require.NoError(t, json.Unmarshal([]byte(res.Blocks[0]), &got), res.Blocks[0])
	return got
}

func assertAllPlanted(t *testing.T, done map[string]string) {
	t.Helper()
	for d, v := range done {
		assert.Equal(t, "planted", v, "unconfined, a script writes every directory of its user: %s", d)
	}
}

// What a per-call script does to its staged helpers, their bytecode cache
// or any directory it can write (the tool root, the staging root and its
// parent) reaches no later run of the runtime, warm or cold, confined or
// not: each run imports the module it was staged with, from the cache its
// own interpreter left.
func TestTamperingWithTheStagedHelpersReachesNoLaterRun(t *testing.T) {
	for _, sandbox := range []bool{false, true} {
		for _, warm := range []int{0, 1} {
			t.Run(fmt.Sprintf("sandbox=%v/warm=%d", sandbox, warm), func(t *testing.T) {
				r := warmRig(t, config.PerCall, sandbox, warm, t.TempDir())
				clean := reportHelpers(t, r, nil)
				done := plant(t, r, nil)
				assert.Equal(t, "planted", done["workspace"], "a script may write its own workspace: %v", done)
				if !sandbox {
					assertAllPlanted(t, done)
				}
				assert.Equal(t, clean, reportHelpers(t, r, nil))
			})
		}
	}
}

// plantHelpers writes into dir, as a script of another run could, a
// genuine copy of the module whose source is src beside a bytecode cache
// that fits it and prints PWNED, and a package of the module's name.
func plantHelpers(t *testing.T, dir string, src []byte) {
	t.Helper()
	prog := `import os, sys, _imp
ext = sys.modules["_frozen_importlib_external"]
d, src = sys.argv[1], open(sys.argv[2], "rb").read()
EVIL = "print('PWNED')\nraise SystemExit(66)\n"
pyc = ext._code_to_hash_pyc(compile(EVIL, "exec_tools.py", "exec"), _imp.source_hash(ext._RAW_MAGIC_NUMBER, src), True)
os.makedirs(os.path.join(d, "__pycache__"), exist_ok=True)
open(os.path.join(d, "__pycache__", "exec_tools.%s.pyc" % sys.implementation.cache_tag), "wb").write(pyc)
open(os.path.join(d, "exec_tools.py"), "wb").write(src)
os.makedirs(os.path.join(d, "exec_tools"), exist_ok=True)
open(os.path.join(d, "exec_tools", "__init__.py"), "w").write(EVIL)
`
	srcFile := filepath.Join(t.TempDir(), "src.py")
	require.NoError(t, os.WriteFile(srcFile, src, 0o600))
	out, err := exec.Command(proctest.Python(t), "-I", "-c", prog, dir, srcFile).CombinedOutput()
	require.NoError(t, err, "%s", out)
}

// Helpers planted in the script's working directory (the tool root) are
// never imported, in either mode, confined or not: a genuine-looking
// exec_tools.py with a fitting cache of other code, and a package of that
// name, are not on the path a script imports its helpers from.
func TestHelpersPlantedInTheToolRootAreNeverImported(t *testing.T) {
	for _, mode := range []config.Mode{config.PerCall, config.Session} {
		for _, sandbox := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/sandbox=%v", mode, sandbox), func(t *testing.T) {
				root := t.TempDir()
				r := warmRig(t, mode, sandbox, 1, root)
				var o *executecode.Owner
				if mode == config.Session {
					o = r.attach("s")
				}
				res := r.run(o, "import exec_tools\ntext(open(exec_tools.__file__).read())")
				require.Len(t, res.Blocks, 1, res.Text())
				plantHelpers(t, root, []byte(res.Blocks[0]))
				if mode == config.Session {
					o = r.attach("fresh") // a new kernel, whose working directory is the planted root
				}
				res = r.run(o, "import os\nprint(sorted(os.listdir('.')))\ntext('genuine')")
				assert.Equal(t, []string{"genuine"}, res.Blocks, res.Text())
				assert.NotContains(t, res.Text(), "PWNED")
				assert.Contains(t, res.Text(), "exec_tools.py", "the planted files are in its working directory")
			})
		}
	}
}

// A confined run after an unconfined one of another runtime sharing its
// tool root and staging directory loads nothing the unconfined script
// wrote: the unconfined script plants fitting caches of its own code in
// every directory it reaches (its workspace, the tool root, its staging
// root, the directory holding both runtimes' staging roots, the confined
// runtime's staging root), and the confined run imports the module its
// own interpreter made the cache of.
func TestAConfinedRunAfterAnUnconfinedOneLoadsNothingItWrote(t *testing.T) {
	root, tmp := t.TempDir(), t.TempDir()
	confined := sandboxRig(t, config.PerCall, proctest.Python(t), withRoot(root), withTmpDir(tmp))
	before := reportHelpers(t, confined, nil)
	roots, err := filepath.Glob(filepath.Join(tmp, "execute-code-private-*"))
	require.NoError(t, err)
	require.Len(t, roots, 1, "the confined runtime's staging root")

	unconfined := newRig(t, withRoot(root), withTmpDir(tmp), withCfg(func(c *config.Config) { c.KernelMode = config.PerCall }))
	assertAllPlanted(t, plant(t, unconfined, nil, roots[0]))

	assert.Equal(t, before, reportHelpers(t, confined, nil))
	res := confined.run(nil, "text('after')")
	assert.Equal(t, []string{"after"}, res.Blocks, res.Text())
	require.NotNil(t, res.Details.Sandbox)
}

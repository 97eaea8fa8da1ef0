package proc

import (
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/internal/proctest"
)

// moduleScript imports helper and reports which code it runs and how the
// cache beside it is flagged.
const moduleScript = `import helper
data = open(helper.__cached__, "rb").read()
print(helper.WORD, int.from_bytes(data[4:8], "little"))
`

const moduleSource = "WORD = 'ahead'\n"

// moduleCmd is a program importing helper.py, whose file holds
// moduleSource, with that module given to be compiled ahead.
func moduleCmd(t *testing.T) Command {
	t.Helper()
	main := mainFile(t, moduleScript)
	require.NoError(t, os.WriteFile(filepath.Join(filepath.Dir(main), "helper.py"), []byte(moduleSource), 0o600))
	return Command{Path: proctest.Python(t), Main: main, Dir: t.TempDir(), Env: append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1"),
		Module: ModuleSource{Name: "helper.py", Source: moduleSource}}
}

// moduleEntries are the Spawner's kept module caches.
func moduleEntries(sp *Spawner) map[string][]byte {
	sp.codeMu.Lock()
	defer sp.codeMu.Unlock()
	out := map[string][]byte{}
	for k, v := range sp.code {
		if strings.HasPrefix(k, "module\x00") {
			out[k] = v
		}
	}
	return out
}

func setModuleEntry(sp *Spawner, key string, pyc []byte) {
	sp.codeMu.Lock()
	defer sp.codeMu.Unlock()
	sp.code[key] = pyc
}

// pycOf is what python makes of source as a hash-based cache with flags,
// its header's hash being that of hashOf.
func pycOf(t *testing.T, source, hashOf string, flags int) []byte {
	t.Helper()
	prog := `import _imp, sys
ext = sys.modules["_frozen_importlib_external"]
src, of, flags = sys.argv[1].encode(), sys.argv[2].encode(), int(sys.argv[3])
pyc = ext._code_to_hash_pyc(compile(src, "<execute-code module>", "exec", dont_inherit=True), _imp.source_hash(ext._RAW_MAGIC_NUMBER, of), True)
pyc[4:8] = flags.to_bytes(4, "little")
print(bytes(pyc).hex())
`
	out, err := exec.Command(proctest.Python(t), "-I", "-c", prog, source, hashOf, string(rune('0'+flags))).Output()
	require.NoError(t, err)
	b, err := hex.DecodeString(strings.TrimSpace(string(out)))
	require.NoError(t, err)
	return b
}

// A module is compiled once per Spawner, binary and shape: the first
// interpreter hands its cache back, the next one is given it and imports
// the module from it, compiling nothing.
func TestAModuleIsCompiledOncePerShape(t *testing.T) {
	sp := newSpawner(t)
	cmd := moduleCmd(t)
	_, out, exit := run(t, sp, cmd)
	require.Equal(t, 0, exit.Code, out)
	assert.Equal(t, "ahead 3\n", out)
	kept := moduleEntries(sp)
	require.Len(t, kept, 1, "the first interpreter's cache is kept")
	var key string
	var first []byte
	for k, v := range kept {
		key, first = k, v
	}
	assert.Equal(t, pycOf(t, moduleSource, moduleSource, 3), first, "it is python's checked cache of the source")

	// What the next interpreter imports is what it was given: a cache
	// that fits the source (here one the test made, of other code) is
	// taken as it is.
	setModuleEntry(sp, key, pycOf(t, "WORD = 'given'\n", moduleSource, 3))
	_, out, _ = run(t, sp, cmd)
	assert.Equal(t, "given 3\n", out)

	other := cmd
	other.Module.Source = "WORD = 'other'\n"
	require.NoError(t, os.WriteFile(filepath.Join(filepath.Dir(other.Main), "helper.py"), []byte(other.Module.Source), 0o600))
	_, out, _ = run(t, sp, other)
	assert.Equal(t, "other 3\n", out, "another source is another entry")
	assert.Len(t, moduleEntries(sp), 2)
}

// A cache the Spawner holds is taken only if it is a checked hash-based
// cache of exactly the module's source holding code; anything else (of
// another source, unchecked, timestamp-based, another magic number, cut,
// garbage) is compiled anew, and the fresh cache replaces it.
func TestAModuleCacheThatDoesNotFitItsSourceIsCompiledAnew(t *testing.T) {
	sp := newSpawner(t)
	cmd := moduleCmd(t)
	_, out, _ := run(t, sp, cmd)
	require.Equal(t, "ahead 3\n", out)
	var key string
	for k := range moduleEntries(sp) {
		key = k
	}
	good := pycOf(t, moduleSource, moduleSource, 3)
	forged := pycOf(t, "WORD = 'forged'\n", "WORD = 'forged'\n", 3)
	badMagic := append([]byte{}, pycOf(t, "WORD = 'forged'\n", moduleSource, 3)...)
	badMagic[0] ^= 0xff
	garbage := append(append([]byte{}, pycOf(t, "WORD = 'forged'\n", moduleSource, 3)[:16]...), "not marshal data"...)
	noCode := append(append([]byte{}, good[:16]...), 'N') // marshal's None
	for name, pyc := range map[string][]byte{
		"of another source": forged,
		"unchecked":         pycOf(t, "WORD = 'forged'\n", moduleSource, 1),
		"timestamp-based":   pycOf(t, "WORD = 'forged'\n", moduleSource, 0),
		"another magic":     badMagic,
		"cut":               pycOf(t, "WORD = 'forged'\n", moduleSource, 3)[:20],
		"header only":       good[:16],
		"garbage body":      garbage,
		"no code":           noCode,
		"empty":             {},
	} {
		t.Run(name, func(t *testing.T) {
			setModuleEntry(sp, key, pyc)
			_, out, exit := run(t, sp, cmd)
			require.Equal(t, 0, exit.Code, out)
			assert.Equal(t, "ahead 3\n", out)
			assert.Equal(t, good, moduleEntries(sp)[key], "the fresh cache replaces it")
		})
	}
}

// A cache is kept per shape: an interpreter to be confined, or one of
// another start-up environment or interpreter, is never given what one
// of another shape made.
func TestAModuleCacheIsKeptPerShape(t *testing.T) {
	cmd := moduleCmd(t)
	code := codeKeyOf(shapeOf(cmd))
	require.NotEmpty(t, code)
	key := moduleKeyOf(code, shapeOf(cmd))
	require.NotEmpty(t, key)
	confined := cmd
	confined.Sandbox = &Sandbox{}
	env := cmd
	env.Env = append(env.Env, "EXECUTE_CODE_OTHER=1")
	tag := cmd
	tag.Tag = "other"
	for name, other := range map[string]Command{"confined": confined, "environment": env, "tag": tag} {
		assert.NotEqual(t, key, moduleKeyOf(codeKeyOf(shapeOf(other)), shapeOf(other)), name)
	}
	none := cmd
	none.Module = ModuleSource{}
	assert.Empty(t, moduleKeyOf(code, shapeOf(none)), "no module, no entry")
	assert.Empty(t, moduleKeyOf("", shapeOf(cmd)), "an unidentified binary keeps nothing")
}

// A module cache an interpreter hands back is kept only within its bound:
// a larger one is read past (the handshake goes on after it) and not
// kept, and a length that is not 8 hex digits fails the interpreter.
func TestAHandedBackModuleCacheIsBounded(t *testing.T) {
	big := fmt.Sprintf("%08x", maxModuleCache+1)
	r := strings.NewReader(big + strings.Repeat("x", maxModuleCache+1) + "w\n")
	pyc, err := readModuleCache(r)
	require.NoError(t, err)
	assert.Nil(t, pyc)
	rest, _ := io.ReadAll(r)
	assert.Equal(t, "w\n", string(rest), "the rest of the handshake is where it was")

	pyc, err = readModuleCache(strings.NewReader("00000003abc"))
	require.NoError(t, err)
	assert.Equal(t, []byte("abc"), pyc)
	for _, bad := range []string{"zzzzzzzzabc", "0000000", "00000010short"} {
		_, err := readModuleCache(strings.NewReader(bad))
		assert.Error(t, err, bad)
	}
}

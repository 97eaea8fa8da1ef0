package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWrongTOMLTypeIsAFileErrorNamingFileLineAndKey(t *testing.T) {
	cases := []struct {
		name string
		doc  string
		line int
		key  string
	}{
		{name: "integer key given an array", doc: table("timeout_ms = 5\nmax_rpc_calls = [1]"), line: 3, key: "max_rpc_calls"},
		{name: "integer key given a float", doc: table("timeout_ms = 1.5"), line: 2, key: "timeout_ms"},
		{name: "integer key given a boolean", doc: table("max_text_bytes = true"), line: 2, key: "max_text_bytes"},
		{name: "limit key given a date", doc: table("nproc_limit = 2024-01-01"), line: 2, key: "nproc_limit"},
		{name: "limit key given a table", doc: table("memory_limit_mb = { a = 1 }"), line: 2, key: "memory_limit_mb"},
		{name: "tools given an integer", doc: table("tools = 5"), line: 2, key: "tools"},
		{name: "tools given a non-string element", doc: table(`tools = ["read", 1]`), line: 2, key: "tools"},
		{name: "enabled given an array", doc: table("enabled = [true]"), line: 2, key: "enabled"},
		{name: "enabled given a float", doc: table("enabled = 1.0"), line: 2, key: "enabled"},
		{name: "kernel_mode given a boolean", doc: table("kernel_mode = true"), line: 2, key: "kernel_mode"},
		{name: "python_path given an integer", doc: table("python_path = 3"), line: 2, key: "python_path"},
		{name: "sandbox given a boolean", doc: table("sandbox = false"), line: 2, key: "sandbox"},
		{name: "allow given an integer", doc: table("allow = 1"), line: 2, key: "allow"},
		{name: "deny given a non-string element", doc: table(`deny = ["webfetch", true]`), line: 2, key: "deny"},
		{name: "require_approval given a table", doc: table("require_approval = { webfetch = true }"), line: 2, key: "require_approval"},
		{name: "approval timeout given a float", doc: table("timeout_ms = 1\napproval_timeout_ms = 1.5"), line: 3, key: "approval_timeout_ms"},
		{
			name: "dotted key under a parent table",
			doc:  "# comment\n[runtime]\nx = 1\ntools.execute_code.timeout_ms = [1]\n",
			line: 4, key: "timeout_ms",
		},
		{
			name: "inline table",
			doc:  "[runtime.tools]\n\nexecute_code = { enabled = true, timeout_ms = [1] }\n",
			line: 3, key: "timeout_ms",
		},
		{
			name: "quoted key",
			doc:  "[runtime.tools.\"execute_code\"]\n\"timeout_ms\" = [1]\n",
			line: 2, key: "timeout_ms",
		},
		{name: "table replaced by a value", doc: "[runtime.tools]\nexecute_code = 5\n", line: 2, key: "runtime.tools.execute_code"},
		{name: "runtime is not a table", doc: "runtime = \"x\"\n", line: 1, key: "runtime"},
		{name: "array of tables", doc: "\n[[runtime.tools.execute_code]]\nenabled = true\n", line: 2, key: "runtime.tools.execute_code"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := writeTOML(t, tc.doc)
			r := loadOpts(t, Options{File: path, Env: []string{}})
			require.ErrorIs(t, r.err, ErrFile)
			var fe *FileError
			require.ErrorAs(t, r.err, &fe)
			assert.Equal(t, path, fe.Path)
			assert.Equal(t, tc.line, fe.Line)
			assert.True(t, strings.HasSuffix(fe.Key, tc.key), "key %q", fe.Key)
			msg := r.err.Error()
			assert.Contains(t, msg, path+":"+strconv.Itoa(tc.line)+":")
			assert.Contains(t, msg, tc.key)
			assert.Contains(t, msg, "wrong type")
			assert.NotContains(t, msg, "\n")
			assert.Equal(t, Config{}, r.cfg)
		})
	}
}

func TestUnparseableTOMLIsAFileErrorWithItsPosition(t *testing.T) {
	cases := []struct {
		name string
		doc  string
		line int
	}{
		{name: "missing value", doc: table("enabled = true\ntimeout_ms = "), line: 3},
		{name: "double equals", doc: "\n\n" + table("timeout_ms = = 3"), line: 4},
		{name: "unterminated string", doc: table(`python_path = "/usr/bin`), line: 2},
		{name: "duplicate key", doc: table("timeout_ms = 1\ntimeout_ms = 2"), line: 3},
		{name: "integer overflow", doc: table("timeout_ms = 99999999999999999999"), line: 2},
		{name: "garbage", doc: "\x00\x01\x02", line: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := writeTOML(t, tc.doc)
			r := loadOpts(t, Options{File: path, Env: []string{}})
			require.ErrorIs(t, r.err, ErrFile)
			var fe *FileError
			require.ErrorAs(t, r.err, &fe)
			assert.Equal(t, tc.line, fe.Line)
			assert.Contains(t, r.err.Error(), path+":"+strconv.Itoa(tc.line)+":")
			assert.NotContains(t, r.err.Error(), "\n")
		})
	}
}

func TestUnparseableTOMLNamesTheKeyWhenGoTOMLKnowsIt(t *testing.T) {
	path := writeTOML(t, table("timeout_ms = 1\ntimeout_ms = 2"))
	r := loadOpts(t, Options{File: path, Env: []string{}})
	require.ErrorIs(t, r.err, ErrFile)
	assert.Contains(t, r.err.Error(), "timeout_ms")
}

func TestUnreadableFileIsAFileError(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.toml")
	r := loadOpts(t, Options{File: missing, Env: []string{}})
	require.ErrorIs(t, r.err, ErrFile)
	assert.ErrorIs(t, r.err, fs.ErrNotExist)
	assert.Contains(t, r.err.Error(), missing)

	dir := t.TempDir()
	r = loadOpts(t, Options{File: dir, Env: []string{}})
	require.ErrorIs(t, r.err, ErrFile)
	assert.Contains(t, r.err.Error(), dir)

	if os.Geteuid() != 0 { // root reads anything
		locked := writeTOML(t, table("enabled = true"))
		require.NoError(t, os.Chmod(locked, 0))
		r = loadOpts(t, Options{File: locked, Env: []string{}})
		require.ErrorIs(t, r.err, ErrFile)
		assert.True(t, errors.Is(r.err, fs.ErrPermission))
	}
}

func TestEmptyFileGivesDefaults(t *testing.T) {
	path := writeTOML(t, "")
	r := loadOpts(t, Options{File: path, Env: []string{}, Cwd: t.TempDir()})
	require.NoError(t, r.err)
	assert.Equal(t, Defaults(), r.cfg)
}

func TestFileErrorWinsOverMalformedEnv(t *testing.T) {
	path := writeTOML(t, table("tools = 5"))
	r := loadOpts(t, Options{File: path, Env: []string{"LEMON_EXECUTE_CODE_TIMEOUT_MS=x"}})
	require.ErrorIs(t, r.err, ErrFile)
}

func TestEnvValuesNeverCauseErrors(t *testing.T) {
	for _, k := range keys {
		for _, v := range []string{"[1]", "1.5", "true", "{a=1}", "\x00", "\xff\xfe", strings.Repeat("9", 400)} {
			r := load(t, in{env: []string{EnvName(k.name) + "=" + v}})
			assert.NoError(t, r.err, "%s=%q", k.name, v)
		}
	}
}

func TestSyntaxErrorNamesTheKeyOnItsLine(t *testing.T) {
	path := writeTOML(t, "\n\n"+table("timeout_ms = = 3"))
	r := loadOpts(t, Options{File: path, Env: []string{}})
	require.ErrorIs(t, r.err, ErrFile)
	var fe *FileError
	require.ErrorAs(t, r.err, &fe)
	assert.Equal(t, "timeout_ms", fe.Key)
	assert.Contains(t, r.err.Error(), path+":4: key timeout_ms: ")
}

func TestDeeplyNestedDocumentsAreRefusedQuickly(t *testing.T) {
	const depth = 10000 // near go-toml's own nesting limit
	cases := map[string]struct{ doc, where string }{
		"arrays": {
			table("timeout_ms = " + strings.Repeat("[", depth) + strings.Repeat("]", depth)),
			":2: key runtime.tools.execute_code.timeout_ms: ",
		},
		"inline tables": {
			"\n[runtime.tools.execute_code]\nextra = " + strings.Repeat("{ a = ", depth) + "1" + strings.Repeat(" }", depth) + "\n",
			":3: key runtime.tools.execute_code.extra.a.a",
		},
		"dotted keys": {"x" + strings.Repeat(".a", depth) + " = 1\n", ": "},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := writeTOML(t, tc.doc)
			r := loadOpts(t, Options{File: path, Env: []string{}})
			require.ErrorIs(t, r.err, ErrFile)
			assert.Contains(t, r.err.Error(), path+tc.where)
			assert.Contains(t, r.err.Error(), "deeper than 64 levels")
		})
	}
}

func TestModeratelyNestedForeignTablesAreFine(t *testing.T) {
	doc := "[runtime.other]\nx = " + strings.Repeat("{ a = ", 40) + "1" + strings.Repeat(" }", 40) + "\n" + table("timeout_ms = 9")
	r := loadOpts(t, Options{File: writeTOML(t, doc), Env: []string{}})
	require.NoError(t, r.err)
	assert.Equal(t, 9, r.cfg.TimeoutMS)
}

func TestBareFragmentFileIsTheExecuteCodeTable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fragment.toml")
	require.NoError(t, os.WriteFile(path, []byte("max_rpc_calls = 3\ntimeout_ms = 1500\n"), 0o644))
	cfg, err := Load(Options{File: path, Env: []string{}})
	require.NoError(t, err)
	assert.Equal(t, 3, cfg.MaxRPCCalls)
	assert.Equal(t, 1500, cfg.TimeoutMS)

	require.NoError(t, os.WriteFile(path, []byte("\n\ntimeout_ms = [1]\n"), 0o644))
	_, err = Load(Options{File: path, Env: []string{}})
	require.ErrorIs(t, err, ErrFile)
	assert.Contains(t, err.Error(), ":3")
	assert.Contains(t, err.Error(), "timeout_ms")
}

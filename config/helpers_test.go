package config

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
)

// warning is one logged warning, decoded from zerolog's JSON output.
type warning struct {
	Level   string `json:"level"`
	Key     string `json:"key"`
	Source  string `json:"source"`
	Value   string `json:"value"`
	Using   string `json:"using"`
	Message string `json:"message"`
}

type loaded struct {
	cfg      Config
	err      error
	warnings []warning
}

// in describes one Load call. A non-empty toml is written to a real file.
type in struct {
	toml string
	env  []string
	over map[string]any
	cwd  string
}

func writeTOML(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "execute-code.toml")
	require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
	return path
}

func load(t *testing.T, i in) loaded {
	t.Helper()
	opts := Options{Env: i.env, Overrides: i.over, Cwd: i.cwd}
	if opts.Env == nil {
		opts.Env = []string{}
	}
	if opts.Cwd == "" {
		opts.Cwd = t.TempDir()
	}
	if i.toml != "" {
		opts.File = writeTOML(t, i.toml)
	}
	return loadOpts(t, opts)
}

func loadOpts(t *testing.T, opts Options) loaded {
	t.Helper()
	var buf bytes.Buffer
	log := zerolog.New(&buf)
	opts.Logger = &log
	cfg, err := Load(opts)
	return loaded{cfg: cfg, err: err, warnings: decodeWarnings(t, buf.Bytes())}
}

func decodeWarnings(t *testing.T, b []byte) []warning {
	t.Helper()
	var out []warning
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var w warning
		require.NoError(t, json.Unmarshal(sc.Bytes(), &w), "log line %q", sc.Text())
		out = append(out, w)
	}
	require.NoError(t, sc.Err())
	return out
}

// table wraps key lines in the execute_code table.
func table(lines string) string {
	return "[runtime.tools.execute_code]\n" + lines + "\n"
}

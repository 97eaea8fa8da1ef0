package tools

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// sandbox is a temp dir holding the tool root ("root") and a sibling
// ("outside") that paths must never reach.
type sandbox struct {
	root    string
	outside string
}

// newSandbox creates the root with files: keys are slash paths relative to
// the root; a key ending in "/" is a directory.
func newSandbox(t testing.TB, files map[string]string) sandbox {
	t.Helper()
	base := t.TempDir()
	s := sandbox{root: filepath.Join(base, "root"), outside: filepath.Join(base, "outside")}
	require.NoError(t, os.Mkdir(s.root, 0o755))
	require.NoError(t, os.Mkdir(s.outside, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(s.outside, "secret.txt"), []byte("top secret\n"), 0o644))
	for name, content := range files {
		p := filepath.Join(s.root, filepath.FromSlash(name))
		if strings.HasSuffix(name, "/") {
			require.NoError(t, os.MkdirAll(p, 0o755))
			continue
		}
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	return s
}

func (s sandbox) symlink(t testing.TB, target, name string) {
	t.Helper()
	require.NoError(t, os.Symlink(target, filepath.Join(s.root, filepath.FromSlash(name))))
}

func (s sandbox) tool(t testing.TB, newTool func(Options) (Tool, error)) Tool {
	t.Helper()
	tool, err := newTool(Options{Root: s.root})
	require.NoError(t, err)
	return tool
}

// call runs a tool and returns its single text block.
func call(t testing.TB, tool Tool, params map[string]any) (string, error) {
	t.Helper()
	return callCtx(context.Background(), t, tool, params)
}

func callCtx(ctx context.Context, t testing.TB, tool Tool, params map[string]any) (string, error) {
	t.Helper()
	res, err := tool.Execute(ctx, params)
	if err != nil {
		return "", err
	}
	require.Len(t, res.Content, 1)
	require.Equal(t, "text", res.Content[0].Type)
	return res.Content[0].Text, nil
}

// lines builds expected output.
func lines(ls ...string) string { return strings.Join(ls, "\n") }

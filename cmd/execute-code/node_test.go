package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNodeCertsWritesACAAndOneCertificatePerName(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	r := cli(t, "", nil, "node", "certs", dir, "--names", "session,node1")
	require.Equal(t, exitOK, r.code, r.stderr)
	lines := strings.Fields(r.stdout)
	assert.Len(t, lines, 6)
	for _, f := range []string{"ca.pem", "ca-key.pem", "session.pem", "session-key.pem", "node1.pem", "node1-key.pem"} {
		fi, err := os.Stat(filepath.Join(dir, f))
		require.NoError(t, err, f)
		if strings.HasSuffix(f, "-key.pem") {
			assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), f)
		}
	}

	// Run again, nothing is overwritten: a usage error naming the file.
	r = cli(t, "", nil, "node", "certs", dir)
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.stderr, "ca.pem: file already exists")
}

func TestNodeUsageErrorsNameWhatIsWrong(t *testing.T) {
	for _, c := range []struct {
		args    []string
		mention string
	}{
		{[]string{"node"}, "usage:"},
		{[]string{"node", "start"}, `unknown subcommand "start"`},
		{[]string{"node", "certs"}, "give exactly one DIR"},
		{[]string{"node", "certs", "a", "b"}, "give exactly one DIR"},
		{[]string{"node", "certs", t.TempDir(), "--names", "../x"}, `invalid certificate name: "../x"`},
		{[]string{"node", "certs", t.TempDir(), "--bogus"}, "bogus"},
	} {
		r := cli(t, "", nil, c.args...)
		assert.Equal(t, exitUsage, r.code, "%v", c.args)
		assert.Contains(t, r.stderr, c.mention, "%v", c.args)
	}
	r := cli(t, "", nil, "node", "--help")
	assert.Equal(t, exitOK, r.code)
	assert.Contains(t, r.stdout, "node certs DIR")
}

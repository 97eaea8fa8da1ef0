package config

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func writeClusterFile(t *testing.T, doc string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "node.toml")
	require.NoError(t, os.WriteFile(p, []byte(doc), 0o600))
	return p
}

func TestLoadClusterReadsTheTableWithFilesRelativeToIt(t *testing.T) {
	p := writeClusterFile(t, `
[runtime.tools.execute_code]
kernel_mode = "session"

[cluster]
listen = "127.0.0.1:7400"
join = "127.0.0.1:7300"
ca_file = "certs/ca.pem"
cert_file = "/etc/x/node.pem"
key_file = "certs/node-key.pem"
capacity = 4
local_capacity = 0
keepalive_ms = 2000
keepalive_timeout_ms = 1000
liveness_interval_ms = 200
liveness_timeout_ms = 1500
`)
	c, err := LoadCluster(p)
	require.NoError(t, err)
	dir := filepath.Dir(p)
	assert.Equal(t, Cluster{
		Listen: "127.0.0.1:7400", Join: "127.0.0.1:7300",
		CAFile: filepath.Join(dir, "certs/ca.pem"), CertFile: "/etc/x/node.pem", KeyFile: filepath.Join(dir, "certs/node-key.pem"),
		Capacity: 4, LocalCapacity: 0, Keepalive: 2 * time.Second, KeepaliveTimeout: time.Second,
		LivenessInterval: 200 * time.Millisecond, LivenessTimeout: 1500 * time.Millisecond,
	}, c)
	require.NoError(t, c.Check(true))

	// The execute_code table of the same file is unaffected by [cluster].
	cfg, err := Load(Options{File: p})
	require.NoError(t, err)
	assert.Equal(t, Session, cfg.KernelMode)
}

func TestLoadClusterWithoutATableIsTheDefaults(t *testing.T) {
	c, err := LoadCluster("")
	require.NoError(t, err)
	assert.Equal(t, DefaultCluster(), c)
	c, err = LoadCluster(writeClusterFile(t, "timeout_ms = 5\n"))
	require.NoError(t, err)
	assert.Equal(t, DefaultCluster(), c)
	assert.Equal(t, -1, c.LocalCapacity, "absent local_capacity is the runtime's own bound")
}

func TestLoadClusterNamesTheBadKeyAndLine(t *testing.T) {
	cases := []struct {
		name, doc, key, msg string
		line                int
	}{
		{"unknown key", "[cluster]\nlisten = \"127.0.0.1:1\"\nlisen = \"x\"\n", "cluster.lisen", "unknown key", 3},
		{"wrong type", "[cluster]\ncapacity = \"4\"\n", "cluster.capacity", "want an integer", 2},
		{"out of range", "[cluster]\ncapacity = 0\n", "cluster.capacity", "out of range", 2},
		{"negative local", "[cluster]\nlocal_capacity = -3\n", "cluster.local_capacity", "out of range", 2},
		{"huge duration", "[cluster]\nkeepalive_ms = 999999999999\n", "cluster.keepalive_ms", "out of range", 2},
		{"not host:port", "[cluster]\nlisten = \"localhost\"\n", "cluster.listen", "not host:port", 2},
		{"bad port", "[cluster]\njoin = \"127.0.0.1:http\"\n", "cluster.join", "port", 2},
		{"no host", "[cluster]\njoin = \":7300\"\n", "cluster.join", "give the host", 2},
		{"file not a string", "[cluster]\nca_file = 3\n", "cluster.ca_file", "want a string", 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadCluster(writeClusterFile(t, tc.doc))
			require.ErrorIs(t, err, ErrCluster)
			require.ErrorIs(t, err, ErrFile)
			var fe *FileError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, tc.key, fe.Key)
			assert.Equal(t, tc.line, fe.Line)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
	_, err := LoadCluster(writeClusterFile(t, "cluster = 5\n"))
	require.ErrorIs(t, err, ErrFile)
	assert.Contains(t, err.Error(), "want a table")
	_, err = LoadCluster(filepath.Join(t.TempDir(), "missing.toml"))
	require.ErrorIs(t, err, ErrFile)
}

func TestClusterCheckRefusesWhatCannotRun(t *testing.T) {
	ok := DefaultCluster()
	ok.CAFile, ok.CertFile, ok.KeyFile, ok.Join = "ca", "c", "k", "127.0.0.1:7300"
	require.NoError(t, ok.Check(true))

	noTLS := ok
	noTLS.KeyFile = ""
	assert.ErrorIs(t, noTLS.Check(false), ErrCluster)
	assert.Contains(t, noTLS.Check(false).Error(), "mutual TLS")

	noJoin := ok
	noJoin.Join = ""
	assert.ErrorIs(t, noJoin.Check(true), ErrCluster)
	assert.NoError(t, noJoin.Check(false), "a session node joins nobody")

	badAddr := ok
	badAddr.Listen = "nowhere"
	assert.ErrorIs(t, badAddr.Check(false), ErrCluster)

	slowPing := ok
	slowPing.LivenessInterval = slowPing.LivenessTimeout
	assert.ErrorIs(t, slowPing.Check(false), ErrCluster)
	assert.Contains(t, slowPing.Check(false).Error(), "liveness_interval_ms")
}

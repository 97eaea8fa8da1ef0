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
		EtcdPrefix: DefaultEtcdPrefix, EtcdTTL: DefaultEtcdTTL,
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

func TestLoadClusterReadsEtcd(t *testing.T) {
	p := writeClusterFile(t, `
[cluster]
ca_file = "ca.pem"
cert_file = "node.pem"
key_file = "node-key.pem"
etcd_endpoints = ["127.0.0.1:2379", "etcd-2.internal:2379"]
etcd_prefix = "/team/nodes/"
etcd_ttl_ms = 5000
etcd_ca_file = "etcd/ca.pem"
etcd_cert_file = "/etc/etcd/client.pem"
etcd_key_file = "etcd/client-key.pem"
`)
	c, err := LoadCluster(p)
	require.NoError(t, err)
	dir := filepath.Dir(p)
	assert.Equal(t, []string{"127.0.0.1:2379", "etcd-2.internal:2379"}, c.EtcdEndpoints)
	assert.Equal(t, "/team/nodes/", c.EtcdPrefix)
	assert.Equal(t, 5*time.Second, c.EtcdTTL)
	assert.Equal(t, filepath.Join(dir, "etcd/ca.pem"), c.EtcdCAFile)
	assert.Equal(t, "/etc/etcd/client.pem", c.EtcdCertFile)
	assert.Equal(t, filepath.Join(dir, "etcd/client-key.pem"), c.EtcdKeyFile)
	assert.True(t, c.Etcd())
	assert.True(t, c.EtcdTLS())
	require.NoError(t, c.Check(true), "a kernel node with etcd needs no join")

	d := DefaultCluster()
	assert.False(t, d.Etcd(), "no etcd unless endpoints are given")
	assert.Equal(t, DefaultEtcdPrefix, d.EtcdPrefix)
	assert.Equal(t, DefaultEtcdTTL, d.EtcdTTL)
}

func TestLoadClusterRefusesBadEtcdSettings(t *testing.T) {
	cases := []struct{ name, doc, key, msg string }{
		{"not an array", `etcd_endpoints = "127.0.0.1:2379"`, "cluster.etcd_endpoints", "want an array"},
		{"empty array", `etcd_endpoints = []`, "cluster.etcd_endpoints", "no endpoint"},
		{"not a string", `etcd_endpoints = ["127.0.0.1:2379", 2379]`, "cluster.etcd_endpoints", "item 2: wrong type"},
		{"a URL", `etcd_endpoints = ["http://127.0.0.1:2379"]`, "cluster.etcd_endpoints", "is a URL"},
		{"no port", `etcd_endpoints = ["127.0.0.1"]`, "cluster.etcd_endpoints", "not host:port"},
		{"port 0", `etcd_endpoints = ["127.0.0.1:0"]`, "cluster.etcd_endpoints", "port 0"},
		{"named port", `etcd_endpoints = ["127.0.0.1:etcd"]`, "cluster.etcd_endpoints", "port"},
		{"no host", `etcd_endpoints = [":2379"]`, "cluster.etcd_endpoints", "give the host"},
		{"user info", `etcd_endpoints = ["root@127.0.0.1:2379"]`, "cluster.etcd_endpoints", "not host:port"},
		{"space", `etcd_endpoints = ["127.0.0.1:2379 "]`, "cluster.etcd_endpoints", "not host:port"},
		{"twice", `etcd_endpoints = ["127.0.0.1:2379", "127.0.0.1:2379"]`, "cluster.etcd_endpoints", "given twice"},
		{"too many", `etcd_endpoints = ["a:1","a:2","a:3","a:4","a:5","a:6","a:7","a:8","a:9","a:10","a:11","a:12","a:13","a:14","a:15","a:16","a:17"]`,
			"cluster.etcd_endpoints", "at most 16"},
		{"prefix without slash", `etcd_prefix = "nodes"`, "cluster.etcd_prefix", "begin and end with '/'"},
		{"prefix root", `etcd_prefix = "/"`, "cluster.etcd_prefix", "name something"},
		{"prefix control", "etcd_prefix = \"/a\\u0001/\"", "cluster.etcd_prefix", "control character"},
		{"ttl not seconds", `etcd_ttl_ms = 1500`, "cluster.etcd_ttl_ms", "whole seconds"},
		{"ttl under a second", `etcd_ttl_ms = 500`, "cluster.etcd_ttl_ms", "out of range"},
		{"ttl over an hour", `etcd_ttl_ms = 3601000`, "cluster.etcd_ttl_ms", "out of range"},
		{"ttl a string", `etcd_ttl_ms = "3s"`, "cluster.etcd_ttl_ms", "want an integer"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadCluster(writeClusterFile(t, "[cluster]\n"+tc.doc+"\n"))
			require.ErrorIs(t, err, ErrCluster)
			var fe *FileError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, tc.key, fe.Key)
			assert.Equal(t, 2, fe.Line)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
}

func TestClusterCheckRefusesEtcdSettingsThatDoNotHoldTogether(t *testing.T) {
	ok := DefaultCluster()
	ok.CAFile, ok.CertFile, ok.KeyFile = "ca", "c", "k"
	ok.EtcdEndpoints = []string{"127.0.0.1:2379"}
	require.NoError(t, ok.Check(true))
	require.NoError(t, ok.Check(false))

	halfTLS := ok
	halfTLS.EtcdCAFile, halfTLS.EtcdCertFile = "eca", "ec"
	require.ErrorIs(t, halfTLS.Check(false), ErrCluster)
	assert.Contains(t, halfTLS.Check(false).Error(), "go together")

	tlsNoEtcd := DefaultCluster()
	tlsNoEtcd.CAFile, tlsNoEtcd.CertFile, tlsNoEtcd.KeyFile, tlsNoEtcd.Join = "ca", "c", "k", "127.0.0.1:7300"
	tlsNoEtcd.EtcdCAFile = "eca"
	require.ErrorIs(t, tlsNoEtcd.Check(true), ErrCluster)
	assert.Contains(t, tlsNoEtcd.Check(true).Error(), "etcd_endpoints")

	badTTL := ok
	badTTL.EtcdTTL = 1500 * time.Millisecond
	require.ErrorIs(t, badTTL.Check(true), ErrCluster)
	assert.Contains(t, badTTL.Check(true).Error(), "etcd_ttl_ms")

	badPrefix := ok
	badPrefix.EtcdPrefix = "x"
	require.ErrorIs(t, badPrefix.Check(true), ErrCluster)
	assert.Contains(t, badPrefix.Check(true).Error(), "etcd_prefix")

	badEndpoint := ok
	badEndpoint.EtcdEndpoints = []string{"127.0.0.1:2379", "https://x:1"}
	require.ErrorIs(t, badEndpoint.Check(true), ErrCluster)
	assert.Contains(t, badEndpoint.Check(true).Error(), "etcd_endpoints: item 2")

	noJoinNoEtcd := ok
	noJoinNoEtcd.EtcdEndpoints = nil
	require.ErrorIs(t, noJoinNoEtcd.Check(true), ErrCluster)
	assert.Contains(t, noJoinNoEtcd.Check(true).Error(), "etcd_endpoints")
}

func TestClusterSetChecksAKeyAsTheFileDoes(t *testing.T) {
	c := DefaultCluster()
	require.NoError(t, c.Set("capacity", int64(8)))
	assert.Equal(t, 8, c.Capacity)
	require.NoError(t, c.Set("etcd_endpoints", []any{"127.0.0.1:2379"}))
	assert.Equal(t, []string{"127.0.0.1:2379"}, c.EtcdEndpoints)
	assert.ErrorContains(t, c.Set("capacity", int64(0)), "out of range")
	assert.ErrorContains(t, c.Set("etcd_ttl_ms", int64(1500)), "whole seconds")
	assert.ErrorContains(t, c.Set("listen", int64(1)), "wrong type")
	assert.ErrorIs(t, c.Set("nope", "x"), ErrCluster)
}

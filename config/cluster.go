package config

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/knadh/koanf/parsers/toml/v2"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/v2"
)

// ErrCluster is a [cluster] table or flag value that cannot be used; the
// error names the key and what is wrong with it.
var ErrCluster = errors.New("invalid cluster configuration")

// Cluster is a node's place in a cluster (docs/cluster.md): where it
// listens, whom it joins, its mutual-TLS files and its bounds. Unlike the
// execute_code table it is strict: a node that runs code on request must
// not start on a setting it misread, so an unknown key, a wrong type or a
// bad value is an error naming the key.
type Cluster struct {
	// Listen is host:port; "" is 127.0.0.1:0 (loopback, any port).
	Listen string
	// Join is the session node a kernel node says hello to.
	Join string
	// CAFile, CertFile and KeyFile are the PEM files of the cluster's CA,
	// this node's certificate and its key.
	CAFile, CertFile, KeyFile string
	// Capacity is how many kernels a kernel node runs at once.
	Capacity int
	// LocalCapacity is how many kernels a session node runs itself, the
	// local node counting as one node; -1 (the default) is the runtime's
	// max_live_kernels, 0 places every kernel on a kernel node.
	LocalCapacity int
	// LivenessInterval is how often a node pings every peer it talks to;
	// a peer that leaves its pings unanswered for LivenessTimeout is seen
	// gone (a frozen node's sessions fail with node_lost within it).
	LivenessInterval, LivenessTimeout time.Duration
	// Keepalive and KeepaliveTimeout are gRPC's pings on every connection,
	// the second line behind the liveness check.
	Keepalive, KeepaliveTimeout time.Duration
	// EtcdEndpoints are the host:port of etcd's client endpoints; none
	// (the default) is the Join membership. With them a kernel node
	// registers in etcd and a session node reads the live nodes from it,
	// so several session nodes share the kernel nodes (docs/cluster.md,
	// Membership).
	EtcdEndpoints []string
	// EtcdPrefix is where the nodes' records live; it begins and ends
	// with '/'.
	EtcdPrefix string
	// EtcdTTL is a kernel node's lease: a node that dies without a word
	// leaves the membership within about EtcdTTL. Whole seconds.
	EtcdTTL time.Duration
	// EtcdCAFile, EtcdCertFile and EtcdKeyFile, all or none, make the
	// etcd client speak TLS with a client certificate (etcd's own PKI,
	// not necessarily the cluster's).
	EtcdCAFile, EtcdCertFile, EtcdKeyFile string
}

// Etcd says whether the membership is etcd's.
func (c Cluster) Etcd() bool { return len(c.EtcdEndpoints) > 0 }

// EtcdTLS says whether the etcd client speaks TLS.
func (c Cluster) EtcdTLS() bool { return c.EtcdCAFile != "" }

// Cluster defaults.
const (
	DefaultNodeCapacity     = 16
	DefaultLivenessInterval = 500 * time.Millisecond
	DefaultLivenessTimeout  = 2 * time.Second
	DefaultKeepalive        = 10 * time.Second
	DefaultKeepaliveTimeout = 3 * time.Second
	// MinLivenessInterval bounds how often a node pings each peer.
	MinLivenessInterval = 50 * time.Millisecond
	// MaxNodeCapacity bounds capacity and local_capacity: each kernel is a
	// python3 of tens of megabytes.
	MaxNodeCapacity = 4096
	// DefaultEtcdPrefix and DefaultEtcdTTL are the etcd membership's.
	DefaultEtcdPrefix = "/execute-code/nodes/"
	DefaultEtcdTTL    = 3 * time.Second
	// MaxEtcdEndpoints bounds etcd_endpoints: an etcd cluster has a few
	// members.
	MaxEtcdEndpoints = 16
	// MaxEtcdTTL bounds etcd_ttl_ms: an hour.
	MaxEtcdTTL = time.Hour
)

// DefaultCluster is the cluster table's value when nothing sets a key.
func DefaultCluster() Cluster {
	return Cluster{Capacity: DefaultNodeCapacity, LocalCapacity: -1,
		LivenessInterval: DefaultLivenessInterval, LivenessTimeout: DefaultLivenessTimeout, Keepalive: DefaultKeepalive,
		KeepaliveTimeout: DefaultKeepaliveTimeout, EtcdPrefix: DefaultEtcdPrefix, EtcdTTL: DefaultEtcdTTL}
}

// clusterKeys are the [cluster] table's keys, each with how its value is
// read into a Cluster.
var clusterKeys = map[string]func(c *Cluster, v any) error{
	"listen":               stringKey(func(c *Cluster, s string) error { c.Listen = s; return checkAddr(s) }),
	"join":                 stringKey(func(c *Cluster, s string) error { c.Join = s; return checkAddr(s) }),
	"ca_file":              stringKey(func(c *Cluster, s string) error { c.CAFile = s; return nil }),
	"cert_file":            stringKey(func(c *Cluster, s string) error { c.CertFile = s; return nil }),
	"key_file":             stringKey(func(c *Cluster, s string) error { c.KeyFile = s; return nil }),
	"capacity":             intKey(1, MaxNodeCapacity, func(c *Cluster, n int) { c.Capacity = n }),
	"local_capacity":       intKey(0, MaxNodeCapacity, func(c *Cluster, n int) { c.LocalCapacity = n }),
	"liveness_interval_ms": msKey(func(c *Cluster, d time.Duration) { c.LivenessInterval = d }),
	"liveness_timeout_ms":  msKey(func(c *Cluster, d time.Duration) { c.LivenessTimeout = d }),
	"keepalive_ms":         msKey(func(c *Cluster, d time.Duration) { c.Keepalive = d }),
	"keepalive_timeout_ms": msKey(func(c *Cluster, d time.Duration) { c.KeepaliveTimeout = d }),
	"etcd_endpoints":       endpointsKey,
	"etcd_prefix":          stringKey(func(c *Cluster, s string) error { c.EtcdPrefix = s; return CheckEtcdPrefix(s) }),
	"etcd_ttl_ms":          etcdTTLKey,
	"etcd_ca_file":         stringKey(func(c *Cluster, s string) error { c.EtcdCAFile = s; return nil }),
	"etcd_cert_file":       stringKey(func(c *Cluster, s string) error { c.EtcdCertFile = s; return nil }),
	"etcd_key_file":        stringKey(func(c *Cluster, s string) error { c.EtcdKeyFile = s; return nil }),
}

// Set sets the [cluster] key to v, a value as the TOML table holds it (a
// string, an int64, or an array of strings for etcd_endpoints), with the
// same checks as a file's: the one way a command-line flag and a file
// key reach a Cluster. The error says what is wrong with v, not naming
// the key, which the caller names its own way.
func (c *Cluster) Set(key string, v any) error {
	set, known := clusterKeys[key]
	if !known {
		return fmt.Errorf("unknown key %q (have %v): %w", key, ClusterKeys(), ErrCluster)
	}
	return set(c, v)
}

// etcdTTLKey reads etcd_ttl_ms: whole seconds, as etcd grants leases.
func etcdTTLKey(c *Cluster, v any) error {
	var ms int
	err := intKey(1000, int(MaxEtcdTTL.Milliseconds()), func(_ *Cluster, n int) { ms = n })(c, v)
	if err != nil {
		return err
	}
	if ms%1000 != 0 {
		return fmt.Errorf("%d is not whole seconds (etcd counts leases in seconds)", ms)
	}
	c.EtcdTTL = time.Duration(ms) * time.Millisecond
	return nil
}

// endpointsKey reads etcd_endpoints: an array of host:port strings.
func endpointsKey(c *Cluster, v any) error {
	list, ok := v.([]any)
	if !ok {
		return fmt.Errorf("wrong type %s; want an array of \"host:port\" strings", typeName(v))
	}
	eps := make([]string, 0, len(list))
	for i, e := range list {
		s, ok := e.(string)
		if !ok {
			return fmt.Errorf("item %d: wrong type %s; want a \"host:port\" string", i+1, typeName(e))
		}
		eps = append(eps, s)
	}
	if err := CheckEtcdEndpoints(eps); err != nil {
		return err
	}
	c.EtcdEndpoints = eps
	return nil
}

// CheckEtcdEndpoints accepts 1 to MaxEtcdEndpoints distinct host:port
// endpoints. A URL is refused: the scheme follows from the etcd TLS
// files, so a configuration cannot say https and mean http.
func CheckEtcdEndpoints(eps []string) error {
	if len(eps) == 0 {
		return errors.New("no endpoint; give host:port of at least one etcd member")
	}
	if len(eps) > MaxEtcdEndpoints {
		return fmt.Errorf("%d endpoints; at most %d", len(eps), MaxEtcdEndpoints)
	}
	seen := map[string]bool{}
	for i, e := range eps {
		if strings.Contains(e, "://") {
			return fmt.Errorf("item %d: %q is a URL; give host:port (etcd_ca_file makes it TLS)", i+1, capRunes(e, maxShown))
		}
		if e == "" || strings.ContainsFunc(e, func(r rune) bool { return r <= 0x20 || r == 0x7f || r == '/' || r == '@' }) {
			return fmt.Errorf("item %d: %q is not host:port", i+1, capRunes(e, maxShown))
		}
		if err := checkAddr(e); err != nil {
			return fmt.Errorf("item %d: %w", i+1, err)
		}
		if _, port, _ := net.SplitHostPort(e); port == "0" {
			return fmt.Errorf("item %d: %q: port 0 is no etcd's", i+1, capRunes(e, maxShown))
		}
		if seen[e] {
			return fmt.Errorf("item %d: %q is given twice", i+1, capRunes(e, maxShown))
		}
		seen[e] = true
	}
	return nil
}

// maxEtcdPrefix bounds etcd_prefix.
const maxEtcdPrefix = 256

// CheckEtcdPrefix accepts a printable key prefix that begins and ends
// with '/' and names something.
func CheckEtcdPrefix(p string) error {
	switch {
	case len(p) < 2 || len(p) > maxEtcdPrefix || !strings.HasPrefix(p, "/") || !strings.HasSuffix(p, "/"):
		return fmt.Errorf("%q must begin and end with '/', name something, and be at most %d bytes", capRunes(p, maxShown), maxEtcdPrefix)
	case strings.ContainsFunc(p, func(r rune) bool { return r <= 0x20 || r == 0x7f }):
		return fmt.Errorf("%q has a space or a control character", capRunes(p, maxShown))
	}
	return nil
}

// ClusterKeys lists the [cluster] table's keys, sorted.
func ClusterKeys() []string {
	out := make([]string, 0, len(clusterKeys))
	for k := range clusterKeys {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// LoadCluster reads the [cluster] table of the TOML file at path (none:
// the defaults). Relative file names in it are relative to the file's
// directory, as an operator reading the file would take them.
func LoadCluster(path string) (Cluster, error) {
	c := DefaultCluster()
	if path == "" {
		return c, nil
	}
	rec := &recordingFile{File: file.Provider(path)}
	k := koanf.New(".")
	if err := k.Load(rec, depthGuard{toml.Parser()}); err != nil {
		return c, fileLoadError(path, rec.data, err)
	}
	raw, ok := k.Raw()["cluster"]
	if !ok {
		return c, nil
	}
	table, ok := raw.(map[string]any)
	if !ok {
		return c, typeError(path, rec.data, []string{"cluster"}, raw, "a table")
	}
	names := make([]string, 0, len(table))
	for name := range table {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		set, known := clusterKeys[name]
		if !known {
			return c, &FileError{Path: path, Line: keyLine(rec.data, []string{"cluster", name}),
				Key: dotted([]string{"cluster", name}), Msg: "unknown key (have " + fmt.Sprint(ClusterKeys()) + ")", Err: ErrCluster}
		}
		if err := set(&c, table[name]); err != nil {
			return c, &FileError{Path: path, Line: keyLine(rec.data, []string{"cluster", name}),
				Key: dotted([]string{"cluster", name}), Msg: err.Error(), Err: ErrCluster}
		}
	}
	dir := filepath.Dir(path)
	for _, f := range []*string{&c.CAFile, &c.CertFile, &c.KeyFile, &c.EtcdCAFile, &c.EtcdCertFile, &c.EtcdKeyFile} {
		if *f != "" && !filepath.IsAbs(*f) {
			*f = filepath.Join(dir, *f)
		}
	}
	return c, nil
}

// Check says whether c can run: a kernel node needs a join address or
// etcd, every node its three TLS files and a timeout shorter than its
// interval, and etcd's settings hold together.
func (c Cluster) Check(node bool) error {
	switch {
	case c.CAFile == "" || c.CertFile == "" || c.KeyFile == "":
		return fmt.Errorf("%w: ca_file, cert_file and key_file are all required (nodes talk only over mutual TLS)", ErrCluster)
	case node && c.Join == "" && !c.Etcd():
		return fmt.Errorf("%w: join: a kernel node needs the session node's address, or etcd_endpoints to register in", ErrCluster)
	case c.Keepalive <= 0 || c.KeepaliveTimeout <= 0 || c.LivenessInterval <= 0 || c.LivenessTimeout <= 0:
		return fmt.Errorf("%w: keepalive_ms, keepalive_timeout_ms, liveness_interval_ms and liveness_timeout_ms must be positive", ErrCluster)
	case c.LivenessInterval < MinLivenessInterval || c.LivenessInterval >= c.LivenessTimeout:
		return fmt.Errorf("%w: liveness_interval_ms must be at least %d and below liveness_timeout_ms", ErrCluster, MinLivenessInterval.Milliseconds())
	}
	if err := checkAddr(c.Listen); err != nil {
		return fmt.Errorf("%w: listen: %w", ErrCluster, err)
	}
	if err := checkAddr(c.Join); err != nil {
		return fmt.Errorf("%w: join: %w", ErrCluster, err)
	}
	return c.checkEtcd()
}

func (c Cluster) checkEtcd() error {
	tlsFiles := 0
	for _, f := range []string{c.EtcdCAFile, c.EtcdCertFile, c.EtcdKeyFile} {
		if f != "" {
			tlsFiles++
		}
	}
	switch {
	case !c.Etcd() && tlsFiles > 0:
		return fmt.Errorf("%w: etcd_ca_file, etcd_cert_file and etcd_key_file are for etcd: give etcd_endpoints too", ErrCluster)
	case !c.Etcd():
		return nil
	case tlsFiles != 0 && tlsFiles != 3:
		return fmt.Errorf("%w: etcd_ca_file, etcd_cert_file and etcd_key_file go together (TLS with a client certificate), or none", ErrCluster)
	case c.EtcdTTL < time.Second || c.EtcdTTL > MaxEtcdTTL || c.EtcdTTL%time.Second != 0:
		return fmt.Errorf("%w: etcd_ttl_ms: %d is not whole seconds from 1000 to %d (etcd counts leases in seconds)",
			ErrCluster, c.EtcdTTL.Milliseconds(), MaxEtcdTTL.Milliseconds())
	}
	if err := CheckEtcdEndpoints(c.EtcdEndpoints); err != nil {
		return fmt.Errorf("%w: etcd_endpoints: %w", ErrCluster, err)
	}
	if err := CheckEtcdPrefix(c.EtcdPrefix); err != nil {
		return fmt.Errorf("%w: etcd_prefix: %w", ErrCluster, err)
	}
	return nil
}

// checkAddr accepts "" and host:port with a numeric port.
func checkAddr(s string) error {
	if s == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("%q is not host:port", capRunes(s, maxShown))
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("%q: the port is not a number from 0 to 65535", capRunes(s, maxShown))
	}
	if host == "" {
		return fmt.Errorf("%q: give the host (127.0.0.1 for loopback)", capRunes(s, maxShown))
	}
	return nil
}

func stringKey(set func(*Cluster, string) error) func(*Cluster, any) error {
	return func(c *Cluster, v any) error {
		s, ok := v.(string)
		if !ok {
			return fmt.Errorf("wrong type %s; want a string", typeName(v))
		}
		return set(c, s)
	}
}

func intKey(lo, hi int, set func(*Cluster, int)) func(*Cluster, any) error {
	return func(c *Cluster, v any) error {
		n, ok := v.(int64)
		if !ok {
			return fmt.Errorf("wrong type %s; want an integer", typeName(v))
		}
		if n < int64(lo) || n > int64(hi) {
			return fmt.Errorf("%d is out of range %d..%d", n, lo, hi)
		}
		set(c, int(n))
		return nil
	}
}

// maxClusterMS bounds every duration key: a day.
const maxClusterMS = 24 * 60 * 60 * 1000

func msKey(set func(*Cluster, time.Duration)) func(*Cluster, any) error {
	return intKey(1, maxClusterMS, func(c *Cluster, n int) { set(c, time.Duration(n)*time.Millisecond) })
}

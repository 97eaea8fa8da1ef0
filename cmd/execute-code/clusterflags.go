package main

import (
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/executecode/executecode/config"
)

// clusterFlags are the flags of `node` and `serve --cluster`; each
// overrides its key of the --config file's [cluster] table.
type clusterFlags struct {
	listen, join, ca, cert, key  string
	capacity, localCapacity      int
	keepaliveMS, keepaliveTimeMS int
	livenessMS, livenessTimeMS   int
	etcd, etcdPrefix             string
	etcdTTLMS                    int
	etcdCA, etcdCert, etcdKey    string
}

func (f *clusterFlags) register(fs *flag.FlagSet, node bool) {
	fs.StringVar(&f.listen, "listen", "", "host:port this node listens on for its peers (default: [cluster] listen, else 127.0.0.1 on any port)")
	fs.StringVar(&f.ca, "ca", "", "PEM file of the cluster's CA (default: [cluster] ca_file)")
	fs.StringVar(&f.cert, "cert", "", "PEM file of this node's certificate (default: [cluster] cert_file)")
	fs.StringVar(&f.key, "key", "", "PEM file of this node's key (default: [cluster] key_file)")
	fs.IntVar(&f.livenessMS, "liveness-interval-ms", 0, "how often this node pings each peer (default: [cluster] liveness_interval_ms, else 500)")
	fs.IntVar(&f.livenessTimeMS, "liveness-timeout-ms", 0, "how long a peer may leave its pings unanswered before it is seen gone (default: [cluster] liveness_timeout_ms, else 2000)")
	fs.IntVar(&f.keepaliveMS, "keepalive-ms", 0, "gRPC keepalive interval (default: [cluster] keepalive_ms, else 10000)")
	fs.IntVar(&f.keepaliveTimeMS, "keepalive-timeout-ms", 0, "how long a peer may not answer a keepalive (default: [cluster] keepalive_timeout_ms, else 3000)")
	fs.StringVar(&f.etcd, "etcd", "", "etcd's client endpoints, host:port,...: kernel nodes register there and session nodes find them there (default: [cluster] etcd_endpoints, else none: join)")
	fs.StringVar(&f.etcdPrefix, "etcd-prefix", "", "etcd key prefix of the nodes' records (default: [cluster] etcd_prefix, else "+config.DefaultEtcdPrefix+")")
	fs.IntVar(&f.etcdTTLMS, "etcd-ttl-ms", 0, "a kernel node's etcd lease, whole seconds in ms (default: [cluster] etcd_ttl_ms, else 3000)")
	fs.StringVar(&f.etcdCA, "etcd-ca", "", "PEM file of etcd's CA: the etcd client speaks TLS (default: [cluster] etcd_ca_file)")
	fs.StringVar(&f.etcdCert, "etcd-cert", "", "PEM file of this node's etcd client certificate (default: [cluster] etcd_cert_file)")
	fs.StringVar(&f.etcdKey, "etcd-key", "", "PEM file of this node's etcd client key (default: [cluster] etcd_key_file)")
	if node {
		fs.StringVar(&f.join, "join", "", "host:port of the session node to join; optional with --etcd (default: [cluster] join)")
		fs.IntVar(&f.capacity, "capacity", 0, "how many kernels this node runs at once (default: [cluster] capacity, else 16)")
	} else {
		fs.IntVar(&f.localCapacity, "local-capacity", 0, "how many kernels the session node runs itself, counting as one node (default: [cluster] local_capacity, else max_live_kernels)")
	}
}

// load reads configFile's [cluster] table and applies over it the flags
// fs was given (parsed); a bad value is an error naming the flag.
func (f *clusterFlags) load(fs *flag.FlagSet, configFile string, node bool) (config.Cluster, error) {
	c, err := config.LoadCluster(configFile)
	if err != nil {
		return c, err
	}
	var bad error
	fs.Visit(func(fl *flag.Flag) {
		bound := func(v, lo, hi int, set func(int)) {
			if v < lo || v > hi {
				bad = fmt.Errorf("--%s: %d is out of range %d..%d", fl.Name, v, lo, hi)
				return
			}
			set(v)
		}
		switch fl.Name {
		case "listen":
			c.Listen = f.listen
		case "join":
			c.Join = f.join
		case "ca":
			c.CAFile = f.ca
		case "cert":
			c.CertFile = f.cert
		case "key":
			c.KeyFile = f.key
		case "capacity":
			bound(f.capacity, 1, config.MaxNodeCapacity, func(n int) { c.Capacity = n })
		case "local-capacity":
			bound(f.localCapacity, 0, config.MaxNodeCapacity, func(n int) { c.LocalCapacity = n })
		case "liveness-interval-ms":
			bound(f.livenessMS, 1, maxFlagMS, func(n int) { c.LivenessInterval = time.Duration(n) * time.Millisecond })
		case "liveness-timeout-ms":
			bound(f.livenessTimeMS, 1, maxFlagMS, func(n int) { c.LivenessTimeout = time.Duration(n) * time.Millisecond })
		case "keepalive-ms":
			bound(f.keepaliveMS, 1, maxFlagMS, func(n int) { c.Keepalive = time.Duration(n) * time.Millisecond })
		case "keepalive-timeout-ms":
			bound(f.keepaliveTimeMS, 1, maxFlagMS, func(n int) { c.KeepaliveTimeout = time.Duration(n) * time.Millisecond })
		case "etcd":
			eps := strings.Split(f.etcd, ",")
			if err := config.CheckEtcdEndpoints(eps); err != nil {
				bad = fmt.Errorf("--etcd: %w", err)
				return
			}
			c.EtcdEndpoints = eps
		case "etcd-prefix":
			if err := config.CheckEtcdPrefix(f.etcdPrefix); err != nil {
				bad = fmt.Errorf("--etcd-prefix: %w", err)
				return
			}
			c.EtcdPrefix = f.etcdPrefix
		case "etcd-ttl-ms":
			bound(f.etcdTTLMS, 1000, int(config.MaxEtcdTTL.Milliseconds()), func(n int) {
				if n%1000 != 0 {
					bad = fmt.Errorf("--etcd-ttl-ms: %d is not whole seconds (etcd counts leases in seconds)", n)
					return
				}
				c.EtcdTTL = time.Duration(n) * time.Millisecond
			})
		case "etcd-ca":
			c.EtcdCAFile = f.etcdCA
		case "etcd-cert":
			c.EtcdCertFile = f.etcdCert
		case "etcd-key":
			c.EtcdKeyFile = f.etcdKey
		}
	})
	if bad != nil {
		return c, bad
	}
	return c, c.Check(node)
}

// maxFlagMS bounds the duration flags: a day.
const maxFlagMS = 24 * 60 * 60 * 1000

// clusterFlagGiven names a cluster flag fs was given, "" if none.
func clusterFlagGiven(fs *flag.FlagSet) string {
	name := ""
	fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "listen", "join", "ca", "cert", "key", "capacity", "local-capacity", "keepalive-ms", "keepalive-timeout-ms",
			"liveness-interval-ms", "liveness-timeout-ms", "etcd", "etcd-prefix", "etcd-ttl-ms", "etcd-ca", "etcd-cert", "etcd-key":
			name = fl.Name
		}
	})
	return name
}

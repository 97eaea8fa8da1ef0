package main

import (
	"flag"
	"fmt"
	"strings"

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

// clusterFlagKeys maps each cluster flag to the [cluster] key it
// overrides.
var clusterFlagKeys = map[string]string{
	"listen": "listen", "join": "join", "ca": "ca_file", "cert": "cert_file", "key": "key_file",
	"capacity": "capacity", "local-capacity": "local_capacity",
	"liveness-interval-ms": "liveness_interval_ms", "liveness-timeout-ms": "liveness_timeout_ms",
	"keepalive-ms": "keepalive_ms", "keepalive-timeout-ms": "keepalive_timeout_ms",
	"etcd": "etcd_endpoints", "etcd-prefix": "etcd_prefix", "etcd-ttl-ms": "etcd_ttl_ms",
	"etcd-ca": "etcd_ca_file", "etcd-cert": "etcd_cert_file", "etcd-key": "etcd_key_file",
}

// load reads configFile's [cluster] table and applies over it the flags
// fs was given (parsed), each through its key's own checks
// (config.Cluster.Set); a bad value is an error naming the flag.
func (f *clusterFlags) load(fs *flag.FlagSet, configFile string, node bool) (config.Cluster, error) {
	c, err := config.LoadCluster(configFile)
	if err != nil {
		return c, err
	}
	var bad error
	fs.Visit(func(fl *flag.Flag) {
		key, ok := clusterFlagKeys[fl.Name]
		if !ok || bad != nil {
			return
		}
		if err := c.Set(key, tomlValue(fl)); err != nil {
			bad = fmt.Errorf("--%s: %w", fl.Name, err)
		}
	})
	if bad != nil {
		return c, bad
	}
	return c, c.Check(node)
}

// tomlValue is fl's value as a TOML table would hold it: an int64 for an
// integer flag, the list of endpoints for --etcd, else the string.
func tomlValue(fl *flag.Flag) any {
	switch v := fl.Value.(flag.Getter).Get().(type) {
	case int:
		return int64(v)
	case string:
		if fl.Name != "etcd" {
			return v
		}
		var eps []any
		for _, ep := range strings.Split(v, ",") {
			eps = append(eps, ep)
		}
		return eps
	default:
		return v
	}
}

// clusterFlagGiven names a cluster flag fs was given, "" if none.
func clusterFlagGiven(fs *flag.FlagSet) string {
	name := ""
	fs.Visit(func(fl *flag.Flag) {
		if _, ok := clusterFlagKeys[fl.Name]; ok {
			name = fl.Name
		}
	})
	return name
}

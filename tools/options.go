package tools

import (
	"net/http"
	"time"
)

// Defaults applied to zero Options fields.
const (
	DefaultFetchTimeout  = 30 * time.Second
	DefaultFetchMaxBytes = 5 << 20
)

// Options configure the built-in tools.
type Options struct {
	// Root is the tool root: every path parameter is resolved against it
	// and no path may leave it. Required for read, grep, find and ls; it
	// must exist and be a directory.
	Root string
	// HTTPClient is used by webfetch; nil means a client with
	// FetchTimeout whose dialer enforces AllowPrivateNetworks. A supplied
	// client is used as is (its redirect policy is replaced by webfetch's):
	// its transport owns network policy, webfetch then only refuses
	// literal private addresses in URLs.
	HTTPClient *http.Client
	// FetchTimeout bounds one webfetch call end to end, redirects and body
	// included. Zero or negative means DefaultFetchTimeout.
	FetchTimeout time.Duration
	// FetchMaxBytes caps the response body webfetch reads; a longer body is
	// cut with a note. Zero or negative means DefaultFetchMaxBytes.
	FetchMaxBytes int64
	// AllowPrivateNetworks lets webfetch reach loopback, private,
	// link-local and other non-public addresses. It is off in the zero
	// value so an embedder serving remote users is not open to server-side
	// request forgery by default; a host where the tool is bash-equivalent
	// anyway (the CLI) turns it on.
	AllowPrivateNetworks bool
}

// Builtin returns all five built-in tools keyed by name.
func Builtin(opts Options) (map[string]Tool, error) {
	constructors := map[string]func(Options) (Tool, error){
		Read:     NewRead,
		Grep:     NewGrep,
		Find:     NewFind,
		Ls:       NewLs,
		Webfetch: NewWebfetch,
	}
	out := make(map[string]Tool, len(constructors))
	for _, name := range Allowlist {
		t, err := constructors[name](opts)
		if err != nil {
			return nil, err
		}
		out[name] = t
	}
	return out, nil
}

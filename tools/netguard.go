package tools

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"syscall"
)

// nonPublic lists ranges that are not reachable public internet beyond
// what netip.Addr's predicates cover: shared address space (carrier NAT),
// IETF protocol assignments, benchmarking, "this network", reserved, and
// the NAT64 prefix that can embed any IPv4 address.
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"),
	netip.MustParsePrefix("64:ff9b:1::/48"),
}

// isPublic reports whether addr is an ordinary public unicast address.
func isPublic(addr netip.Addr) bool {
	addr = addr.Unmap()
	if !addr.IsValid() || addr.IsLoopback() || addr.IsPrivate() || addr.IsUnspecified() ||
		addr.IsLinkLocalUnicast() || addr.IsLinkLocalMulticast() ||
		addr.IsInterfaceLocalMulticast() || addr.IsMulticast() {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(addr) {
			return false
		}
	}
	return true
}

func privateRefused(what string) error {
	return newError(ErrNotAllowed, "webfetch refuses %s: it is not a public internet address (private networks are not allowed here)", what)
}

// checkLiteralHost refuses URLs that name a non-public host outright, so
// the refusal names the host the script wrote, before any DNS lookup.
func checkLiteralHost(host string) error {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return privateRefused(host)
	}
	if addr, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil && !isPublic(addr) {
		return privateRefused(host)
	}
	return nil
}

// guardDial runs on every connection the default client opens, after DNS,
// so a public name that resolves to a private address (DNS rebinding
// included) is refused at the address actually dialled.
func guardDial(_ context.Context, _, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return privateRefused(address)
	}
	addr, err := netip.ParseAddr(host)
	if err != nil || !isPublic(addr) {
		return privateRefused(host)
	}
	return nil
}

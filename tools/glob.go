package tools

import (
	"path"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// globMatcher matches doublestar patterns. A pattern without a slash is
// matched against the entry's name alone ("*.go" finds Go files at any
// depth, like find -name); one with a slash against the whole path
// relative to the search start ("src/**/*.go").
type globMatcher struct {
	pattern  string
	fullPath bool
}

func newGlob(tool, param, pattern string) (globMatcher, error) {
	if !doublestar.ValidatePattern(pattern) {
		return globMatcher{}, badParam("parameter %q of %s is not a valid glob: %q", param, tool, pattern)
	}
	return globMatcher{pattern: pattern, fullPath: strings.Contains(pattern, "/")}, nil
}

// match reports whether the entry at rel (slash path relative to the
// search start) matches.
func (g globMatcher) match(rel string) bool {
	subject := rel
	if !g.fullPath {
		subject = path.Base(rel)
	}
	return doublestar.MatchUnvalidated(g.pattern, subject)
}

// relTo returns rel (relative to the root) relative to start, both slash
// paths relative to the root.
func relTo(start, rel string) string {
	if start == "." || start == "" {
		return rel
	}
	return strings.TrimPrefix(rel, start+"/")
}

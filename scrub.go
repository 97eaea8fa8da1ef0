package executecode

import (
	"path/filepath"
	"strings"

	"github.com/executecode/executecode/privatetmp"
)

// Canonical names that replace host paths in everything the model sees
// (design.md departure 3). The spill file's path is left visible on purpose:
// the model may read() it.
const (
	workspaceName = "<workspace>"
	bridgeName    = "<workspace>/rpc"
	rootName      = "<private-root>"
	tokenName     = "<token>"
)

// scrubber rewrites one run's host paths and token.
type scrubber struct{ r *strings.Replacer }

func newScrubber(ws workspace, root *privatetmp.Root) scrubber {
	var pairs []string
	add := func(path, name string) {
		if path == "" {
			return
		}
		pairs = append(pairs, path, name)
		if real, err := filepath.EvalSymlinks(path); err == nil && real != path {
			pairs = append(pairs, real, name)
		}
	}
	// Longest first: the rpc dir lives inside the base.
	add(ws.rpc, bridgeName)
	add(ws.base, workspaceName)
	if ws.token != "" {
		pairs = append(pairs, ws.token, tokenName)
	}
	return scrubber{strings.NewReplacer(pairs...)}
}

func (s scrubber) scrub(text string) string {
	if s.r == nil {
		return text
	}
	return s.r.Replace(text)
}

// scrubError renders err without the staging root's host path.
func scrubError(err error, root *privatetmp.Root) string {
	msg := err.Error()
	if root != nil {
		msg = strings.ReplaceAll(msg, root.Path(), rootName)
	}
	return msg
}

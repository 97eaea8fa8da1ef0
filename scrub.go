package executecode

import (
	"path/filepath"

	"github.com/executecode/executecode/kernelworker"
	"github.com/executecode/executecode/privatetmp"
)

// Canonical names that replace host paths in everything the model sees
// (README, "The result"). The spill file's path is left visible on
// purpose: the model may read() it.
const (
	workspaceName = "<workspace>"
	bridgeName    = "<workspace>/rpc"
	rootName      = "<private-root>"
	tokenName     = "<token>"
)

// scrubTarget is one host directory and the name that replaces it.
type scrubTarget struct{ path, name string }

// newScrubber builds the one scrubber of a run or cell: it rewrites the
// given directories, the staging root and the bridge token, each path also
// in its symlink-resolved form (what os.getcwd or os.path.realpath
// print). The same scrubber rewrites the captured output as it streams
// (before truncation, and so in the spill) and every other string a
// script can make the host say: text() blocks, notify() messages, the
// exception headline and traceback, and errors.
func newScrubber(root *privatetmp.Root, token string, dirs ...scrubTarget) *kernelworker.Scrubber {
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
	for _, d := range dirs {
		add(d.path, d.name)
	}
	if root != nil {
		add(root.Path(), rootName)
	}
	if token != "" {
		pairs = append(pairs, token, tokenName)
	}
	return kernelworker.NewScrubber(pairs...)
}

// runScrubber is the scrubber of a per-call run's workspace.
func runScrubber(ws workspace, root *privatetmp.Root) *kernelworker.Scrubber {
	return newScrubber(root, ws.token, scrubTarget{ws.rpc, bridgeName}, scrubTarget{ws.base, workspaceName})
}

// scrubError renders err without the staging root's host path.
func scrubError(err error, root *privatetmp.Root) string {
	return newScrubber(root, "").String(err.Error())
}

// scrubAll scrubs each string of ss.
func scrubAll(sc *kernelworker.Scrubber, ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = sc.String(s)
	}
	return out
}

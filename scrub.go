package executecode

import (
	"path/filepath"
	"strings"

	"github.com/executecode/executecode/internal/proc"
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

// scrubRoot is the staging root a scrubber covers: its path and its
// symlink-resolved form (resolved once, when the root is opened).
type scrubRoot struct{ path, real string }

// newScrubber builds the one scrubber of a run or cell: it rewrites the
// given directories, the staging root and the bridge token, each path also
// in its symlink-resolved form (what os.getcwd or os.path.realpath
// print). The same scrubber rewrites the captured output as it streams
// (before truncation, and so in the spill) and every other string a
// script can make the host say: text() blocks, notify() messages, the
// exception headline and traceback, and errors.
func newScrubber(root scrubRoot, token string, dirs ...scrubTarget) *proc.Scrubber {
	var pairs []string
	add := func(path, name string) {
		if path == "" {
			return
		}
		pairs = append(pairs, path, name)
		// The directories are the host's own, made inside the root, so
		// only the root's part of a path can resolve differently.
		var real string
		switch rest, under := strings.CutPrefix(path, root.path+"/"); {
		case path == root.path:
			real = root.real
		case under && root.real != "":
			real = root.real + "/" + rest
		default:
			real, _ = filepath.EvalSymlinks(path)
		}
		if real != "" && real != path {
			pairs = append(pairs, real, name)
		}
	}
	for _, d := range dirs {
		add(d.path, d.name)
	}
	add(root.path, rootName)
	if token != "" {
		pairs = append(pairs, token, tokenName)
	}
	return proc.NewScrubber(pairs...)
}

// scrubRoot is the work root's scrubRoot; zero before it was opened.
func (r *Runtime) scrubRoot() scrubRoot {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.roots.work == nil {
		return scrubRoot{}
	}
	return scrubRoot{r.roots.work.Path(), r.roots.workReal}
}

// runScrubber is the scrubber of a per-call run's workspace.
func (r *Runtime) runScrubber(ws workspace) *proc.Scrubber {
	return newScrubber(r.scrubRoot(), ws.token, scrubTarget{ws.rpc, bridgeName}, scrubTarget{ws.base, workspaceName})
}

// scrubError renders err without the staging root's host path.
func (r *Runtime) scrubError(err error) string {
	return newScrubber(r.scrubRoot(), "").String(err.Error())
}

// scrubAll scrubs each string of ss.
func scrubAll(sc *proc.Scrubber, ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = sc.String(s)
	}
	return out
}

package registry

import (
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/executecode/executecode/shimpy"
)

// KeyCache is NewKey for a caller that builds the same key on every call
// (the facade, once per session cell): resolving the working directory
// and the interpreter walks every component of both paths, link by link,
// which costs a cell more than its own interpretation. It remembers each
// path's resolution with the identity (device, inode, mode) of the file
// it named and of the file it resolved to, and takes the remembered
// resolution only while a stat of each still finds exactly those: a
// path removed, replaced, retargeted, or made unexecutable is resolved
// again (and fails, or keys another kernel) exactly as NewKey would. The
// zero KeyCache is ready; it is safe for concurrent use.
type KeyCache struct {
	mu    sync.Mutex
	paths map[string]resolution
}

// resolution is a path as NewKey canonicalized it.
type resolution struct {
	canonical string
	from, to  fileID
}

type fileID struct {
	dev, ino uint64
	mode     uint32
}

func statID(path string) (fileID, bool) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return fileID{}, false
	}
	return fileID{dev: st.Dev, ino: st.Ino, mode: st.Mode}, true
}

// lstatID is the identity of path itself: a resolved path never ends in a
// link, so one that does now (the directory was renamed and a link left
// in its place) no longer matches.
func lstatID(path string) (fileID, bool) {
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		return fileID{}, false
	}
	return fileID{dev: st.Dev, ino: st.Ino, mode: st.Mode}, true
}

// NewKey is NewKey(scopeID, agentID, cwd, interpreter, helpers), with the
// paths' resolutions remembered.
func (c *KeyCache) NewKey(scopeID, agentID, cwd, interpreter string, helpers []string) (Key, error) {
	canonCwd, cwdOK := c.lookup("cwd\x00" + cwd)
	canonInterp, interpOK := c.lookup("interpreter\x00" + interpreter)
	if !cwdOK || !interpOK || strings.TrimSpace(scopeID) == "" || strings.TrimSpace(agentID) == "" {
		k, err := NewKey(scopeID, agentID, cwd, interpreter, helpers)
		if err == nil {
			c.remember("cwd\x00"+cwd, cwd, k.Cwd)
			c.remember("interpreter\x00"+interpreter, interpreter, k.Interpreter)
		}
		return k, err
	}
	hs, err := canonicalHelpers(helpers)
	if err != nil {
		return Key{}, err
	}
	return Key{ScopeID: scopeID, AgentID: agentID, Cwd: canonCwd, Interpreter: canonInterp,
		Helpers: hs, ProtocolVersion: shimpy.ProtocolVersion}, nil
}

// lookup returns the remembered resolution of name while both files it
// joins are still the ones it saw.
func (c *KeyCache) lookup(name string) (string, bool) {
	c.mu.Lock()
	r, ok := c.paths[name]
	c.mu.Unlock()
	if !ok {
		return "", false
	}
	input := name[strings.IndexByte(name, 0)+1:]
	from, okFrom := statID(filepath.Clean(input))
	to, okTo := lstatID(r.canonical)
	if !okFrom || !okTo || from != r.from || to != r.to {
		return "", false
	}
	return r.canonical, true
}

// remember records that input resolved to canonical, with the identity of
// both as they are now: if either changed since the resolution, the
// record never matches and the next key resolves again.
func (c *KeyCache) remember(name, input, canonical string) {
	if !filepath.IsAbs(input) {
		// A relative path depends on the current directory, and a bare
		// interpreter name on PATH, neither of which a stat would show.
		return
	}
	// NewKey collapses "." and ".." before it reads a link: the path it
	// resolved is the cleaned one.
	from, okFrom := statID(filepath.Clean(input))
	to, okTo := lstatID(canonical)
	if !okFrom || !okTo {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.paths == nil {
		c.paths = map[string]resolution{}
	}
	if len(c.paths) >= maxRemembered {
		clear(c.paths)
	}
	c.paths[name] = resolution{canonical: canonical, from: from, to: to}
}

// maxRemembered bounds the paths a KeyCache holds; a runtime has one
// working directory and one interpreter.
const maxRemembered = 64

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
// absolute path's resolution with the identity (device, inode, mode) of
// the file the path names, and takes the remembered resolution only while
// a stat of the path still finds exactly that file: a path removed,
// replaced, retargeted to another file, or made unexecutable is resolved
// again (and fails, or keys another kernel) exactly as NewKey would. A
// change that keeps the file and only respells its resolved path (a
// directory on the way renamed, a link left in its place) keeps the old
// spelling of the same file (docs/decisions.md). The zero KeyCache is
// ready; it is safe for concurrent use.
type KeyCache struct {
	mu    sync.Mutex
	paths map[string]resolution
}

// resolution is a path as NewKey canonicalized it, and the file it named.
type resolution struct {
	canonical string
	file      fileID
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

// lookup returns the remembered resolution of name while the file its
// path names is still the one it saw.
func (c *KeyCache) lookup(name string) (string, bool) {
	c.mu.Lock()
	r, ok := c.paths[name]
	c.mu.Unlock()
	if !ok {
		return "", false
	}
	input := name[strings.IndexByte(name, 0)+1:]
	if file, ok := statID(filepath.Clean(input)); !ok || file != r.file {
		return "", false
	}
	return r.canonical, true
}

// remember records that input resolved to canonical, with the identity of
// the file it names now: if that changed since the resolution, the record
// never matches and the next key resolves again.
func (c *KeyCache) remember(name, input, canonical string) {
	if !filepath.IsAbs(input) {
		// A relative path depends on the current directory, and a bare
		// interpreter name on PATH, neither of which a stat would show.
		return
	}
	// NewKey collapses "." and ".." before it reads a link: the path it
	// resolved is the cleaned one.
	file, ok := statID(filepath.Clean(input))
	if !ok {
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
	c.paths[name] = resolution{canonical: canonical, file: file}
}

// maxRemembered bounds the paths a KeyCache holds; a runtime has one
// working directory and one interpreter.
const maxRemembered = 64

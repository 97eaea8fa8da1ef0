package tools

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// maxSymlinkHops bounds the resolution of dangling symlinks, as the kernel
// bounds ELOOP.
const maxSymlinkHops = 40

// root is the directory every path parameter is resolved against.
type root struct {
	// real is the root with every symlink resolved; containment is checked
	// against it so a symlinked root and paths through it agree.
	real string
	// dev and ino name the directory real was when the tools were made:
	// a quick open (openBeneath) proceeds only from that very directory.
	dev, ino uint64
}

func newRoot(dir string) (root, error) {
	if dir == "" {
		return root{}, errors.New("tools: Options.Root is required")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return root{}, fmt.Errorf("tools: root %q: %w", dir, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return root{}, fmt.Errorf("tools: root %q: %w", dir, err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return root{}, fmt.Errorf("tools: root %q: %w", dir, err)
	}
	if !fi.IsDir() {
		return root{}, fmt.Errorf("tools: root %q is not a directory", dir)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return root{real: real}, nil // no identity: every open takes the full path
	}
	return root{real: real, dev: st.Dev, ino: st.Ino}, nil
}

// target is a path parameter after resolution.
type target struct {
	// rel is the real (symlink-free) path relative to the real root, in
	// the form os.Root and fs.FS accept: "." for the root itself.
	rel string
	// shown is how errors name the path: as the script wrote it when that
	// was relative, root-relative when it was absolute and inside the root.
	shown string
}

// resolve maps a script-supplied path onto the tree under the root. Every
// symlink is resolved (also a dangling one, by following its text), so a
// link inside the root that points outside is refused exactly like "..".
// Missing paths resolve fine: the caller's open reports ErrNotFound, after
// the escape check, so a script cannot probe outside the root by telling
// "missing" from "escapes".
func (r root) resolve(p string) (target, error) {
	real, err := realPath(r.lexical(p), 0)
	if err != nil {
		if errors.Is(err, errTooManyLinks) {
			return target{}, &toolError{msg: fmt.Sprintf("%s: too many levels of symbolic links", p), cause: err}
		}
		return target{}, fsError(p, err)
	}
	rel, ok := r.inside(real)
	if !ok {
		return target{}, newError(ErrEscapes, "path %q escapes the tool root", p)
	}
	shown := p
	if filepath.IsAbs(p) {
		shown = filepath.ToSlash(rel)
	}
	return target{rel: rel, shown: shown}, nil
}

// lexical is p joined to the root when relative, and cleaned: "a/../b"
// is b even where a is a link, on every path the tools take.
func (r root) lexical(p string) string {
	if !filepath.IsAbs(p) {
		p = filepath.Join(r.real, p)
	}
	return filepath.Clean(p)
}

func (r root) inside(real string) (string, bool) {
	rel, err := filepath.Rel(r.real, real)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", false
	}
	return rel, true
}

var errTooManyLinks = errors.New("too many levels of symbolic links")

// realPath is filepath.EvalSymlinks for paths whose tail may not exist:
// the longest existing prefix is resolved and the rest appended. A
// dangling symlink on the way is followed by its text, so where it would
// lead is what gets checked.
func realPath(p string, hops int) (string, error) {
	real, err := filepath.EvalSymlinks(p)
	if err == nil {
		return real, nil
	}
	if !errors.Is(err, fs.ErrNotExist) && !isNotDir(err) {
		return "", err
	}
	parent := filepath.Dir(p)
	if parent == p {
		return p, nil
	}
	realParent, err := realPath(parent, hops)
	if err != nil {
		return "", err
	}
	joined := filepath.Join(realParent, filepath.Base(p))
	fi, err := os.Lstat(joined)
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		return joined, nil
	}
	if hops >= maxSymlinkHops {
		return "", errTooManyLinks
	}
	link, err := os.Readlink(joined)
	if err != nil {
		return joined, nil
	}
	if !filepath.IsAbs(link) {
		link = filepath.Join(realParent, link)
	}
	return realPath(filepath.Clean(link), hops+1)
}

func isNotDir(err error) bool { return errors.Is(err, syscall.ENOTDIR) }

// open opens the root for one call. A fresh os.Root per call keeps no
// descriptor alive between calls and confines every later open to the
// tree even if a path is swapped for a symlink after it was resolved.
func (r root) open() (*os.Root, error) {
	rt, err := os.OpenRoot(r.real)
	if err != nil {
		return nil, &toolError{msg: "the tool root is not accessible: " + osReason(err), cause: err}
	}
	return rt, nil
}

// display is a root-relative, slash-separated path for output.
func display(rel string) string {
	return filepath.ToSlash(rel)
}

// joinRel joins slash-separated relative paths, treating "." as empty.
func joinRel(dir, name string) string {
	if dir == "." || dir == "" {
		return name
	}
	return dir + "/" + name
}

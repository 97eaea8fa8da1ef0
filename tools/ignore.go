package tools

import (
	"io/fs"
	"path"
	"strings"

	gitignore "github.com/sabhiram/go-gitignore"
)

// ignoreFile is one .gitignore, whose patterns apply below its directory.
type ignoreFile struct {
	dir   string // slash path relative to the root, "" for the root
	rules *gitignore.GitIgnore
}

// ignoreStack holds the .gitignore files from the root down to the
// directory being walked, shallowest first.
type ignoreStack []ignoreFile

// loadIgnore reads dir/.gitignore if there is one. Unreadable files are
// treated as absent: a walk should not fail over an ignore file.
func loadIgnore(fsys fs.FS, dir string) (ignoreFile, bool) {
	data, err := fs.ReadFile(fsys, path.Join(dir, ".gitignore"))
	if err != nil {
		return ignoreFile{}, false
	}
	lines := strings.Split(string(data), "\n")
	if dir == "." {
		dir = ""
	}
	return ignoreFile{dir: dir, rules: gitignore.CompileIgnoreLines(lines...)}, true
}

// push returns the stack with dir's .gitignore (if any) on top. The result
// may share the backing array with s; callers keep one stack per branch of
// the walk, which the recursion does by construction.
func (s ignoreStack) push(fsys fs.FS, dir string) ignoreStack {
	if f, ok := loadIgnore(fsys, dir); ok {
		return append(s[:len(s):len(s)], f)
	}
	return s
}

// stackFor loads the .gitignore files of every directory from the root
// down to and including dir, so a walk that starts in a subdirectory
// honours the rules its ancestors set. A script that names an ignored
// directory (path="vendor") wants it searched: the rules that ignore it,
// and those of its ancestors, are dropped, leaving only the .gitignore
// files at or below the ignored directory.
func stackFor(fsys fs.FS, dir string) ignoreStack {
	s := ignoreStack{}.push(fsys, ".")
	if dir == "." {
		return s
	}
	cur := ""
	for part := range strings.SplitSeq(dir, "/") {
		cur = joinRel(cur, part)
		if s.ignored(cur, true) {
			s = nil
		}
		s = s.push(fsys, cur)
	}
	return s
}

// ignored reports whether rel (slash path relative to the root) is ignored.
// The deepest file with an opinion decides: a pattern that matches ignores,
// a negation ("!keep.txt") that undoes a match in the same file keeps.
func (s ignoreStack) ignored(rel string, isDir bool) bool {
	for i := len(s) - 1; i >= 0; i-- {
		sub := rel
		if s[i].dir != "" {
			var ok bool
			sub, ok = strings.CutPrefix(rel, s[i].dir+"/")
			if !ok {
				continue
			}
		}
		if isDir {
			// "build/" only matches directories, and the library tells
			// them apart by the trailing slash.
			sub += "/"
		}
		matched, how := s[i].rules.MatchesPathHow(sub)
		if matched {
			return true
		}
		if how != nil {
			return false
		}
	}
	return false
}

package proc

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ReadSet is what one interpreter needs to read (and execute) to start
// and to import its standard library, derived from the interpreter
// itself, unconfined, once (see DeriveReadSet).
type ReadSet struct {
	// Exec are the interpreter's real binary and its ELF interpreter:
	// the files an exec of python (a script's subprocess) runs.
	Exec []string
	// Read are its trees (stdlib, site-packages, every sys.path entry),
	// a virtualenv's pyvenv.cfg, and every shared object it maps.
	Read []string
	// Optional are system files python and the C library read when they
	// exist: the loader's cache, time zones, locales.
	Optional []string
}

// All is every path of the set.
func (rs ReadSet) All() []string {
	return slices.Concat(rs.Exec, rs.Read, rs.Optional)
}

// optionalReads save python pointless denials (the loader falls back to
// its default directories, time and locale functions to UTC and C) and
// hold nothing private.
var optionalReads = []string{
	"/etc/ld.so.cache", "/etc/localtime", "/usr/share/zoneinfo", "/usr/lib/locale",
	"/usr/lib/x86_64-linux-gnu/gconv", "/usr/share/locale/locale.alias", "/dev/urandom",
}

//go:embed probe.py
var probeSource string

// probeMarker precedes the probe's answer, so that whatever a site hook
// prints first is skipped.
const probeMarker = "\x1eexecute-code-probe\t"

// probeBound bounds the probe: it loads every extension module of the
// installation.
const probeBound = 30 * time.Second

type probeAnswer struct {
	Executable string   `json:"executable"`
	Prefixes   []string `json:"prefixes"`
	Trees      []string `json:"trees"`
	Path       []string `json:"path"`
	Mapped     []string `json:"mapped"`
}

// readSets caches each interpreter's set, keyed by the path as given,
// the real binary's identity (an upgrade in place changes it) and the
// part of the environment that changes what python reads: PYTHON*
// (PYTHONPATH and PYTHONHOME change sys.path), LD_* (LD_LIBRARY_PATH and
// LD_PRELOAD change the libraries) and VIRTUAL_ENV.
var readSets struct {
	mu sync.Mutex
	m  map[readSetKey]ReadSet
}

type readSetKey struct {
	python             string
	dev, ino           uint64
	size, mtime, ctime int64
	env                [sha256.Size]byte
}

// DeriveReadSet runs python once, unconfined, under env (as a sandboxed
// run would get it) and returns what it reads; the answer is cached per
// interpreter path and binary for the life of the process. The probe is
// started by s like any interpreter, so it is limited, guarded and killed
// with its group.
func (s *Spawner) DeriveReadSet(ctx context.Context, python string, env []string) (ReadSet, error) {
	env = (&Sandbox{}).env(env)
	key, err := readSetKeyOf(python, env)
	if err != nil {
		return ReadSet{}, fmt.Errorf("%w: interpreter %s: %w", ErrSandbox, python, err)
	}
	readSets.mu.Lock()
	defer readSets.mu.Unlock()
	if rs, ok := readSets.m[key]; ok {
		return rs, nil
	}
	rs, err := s.probe(ctx, python, env)
	if err != nil {
		return ReadSet{}, fmt.Errorf("%w: derive the read set of %s: %w", ErrSandbox, python, err)
	}
	if readSets.m == nil {
		readSets.m = map[readSetKey]ReadSet{}
	}
	readSets.m[key] = rs
	return rs, nil
}

func readSetKeyOf(python string, env []string) (readSetKey, error) {
	real, err := filepath.EvalSymlinks(python)
	if err != nil {
		return readSetKey{}, err
	}
	var st syscall.Stat_t
	if err := syscall.Stat(real, &st); err != nil {
		return readSetKey{}, err
	}
	var sorted []string
	for _, kv := range env {
		if strings.HasPrefix(kv, "PYTHON") || strings.HasPrefix(kv, "LD_") || strings.HasPrefix(kv, "VIRTUAL_ENV=") {
			sorted = append(sorted, kv)
		}
	}
	slices.Sort(sorted)
	return readSetKey{
		python: python, dev: st.Dev, ino: st.Ino, size: st.Size,
		mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano(),
		env: sha256.Sum256([]byte(strings.Join(sorted, "\x00"))),
	}, nil
}

func (s *Spawner) probe(ctx context.Context, python string, env []string) (ReadSet, error) {
	ctx, cancel := context.WithTimeout(ctx, probeBound)
	defer cancel()
	// The answer is the last line; whatever a hook printed before it
	// may be cut.
	out, errOut := NewTailBuffer(4<<20), NewTailBuffer(4<<10)
	p, err := s.Start(ctx, Command{
		Path:   python,
		Args:   []string{"-c", Bootstrap + probeSource},
		Dir:    "/",
		Env:    env,
		Output: out,
		Stderr: errOut,
	})
	if err != nil {
		return ReadSet{}, err
	}
	select {
	case <-p.Done():
	case <-ctx.Done():
		p.Kill()
		<-p.Done()
		return ReadSet{}, fmt.Errorf("probe: %w", ctx.Err())
	}
	if code := p.Exit().Code; code != 0 {
		return ReadSet{}, fmt.Errorf("probe exited %d: %s", code, strings.TrimSpace(errOut.String()))
	}
	_, answer, ok := strings.Cut(out.String(), probeMarker)
	if !ok {
		return ReadSet{}, errors.New("probe gave no answer")
	}
	var a probeAnswer
	if err := json.NewDecoder(strings.NewReader(answer)).Decode(&a); err != nil {
		return ReadSet{}, fmt.Errorf("probe answer: %w", err)
	}
	return a.readSet()
}

// readSet turns the probe's answer into rules: the real binary and its
// ELF interpreter (Landlock checks an exec on the symlink's target, and
// the kernel opens the loader as an executable), every tree and sys.path
// entry that exists, each prefix's pyvenv.cfg (site dies without it in a
// virtualenv) and the one beside the executable and one level up, where
// python looks for it, and every mapped file by its exact path: a
// directory rule for each library would open all of /usr/lib.
func (a probeAnswer) readSet() (ReadSet, error) {
	if !filepath.IsAbs(a.Executable) {
		return ReadSet{}, fmt.Errorf("probe: sys.executable %q is not absolute", a.Executable)
	}
	bin, err := filepath.EvalSymlinks(a.Executable)
	if err != nil {
		return ReadSet{}, fmt.Errorf("probe: sys.executable: %w", err)
	}
	exec := []string{bin}
	if interp, err := elfInterpreter(bin); err != nil {
		return ReadSet{}, err
	} else if interp != "" {
		exec = append(exec, interp)
	}
	var read []string
	add := func(p string) {
		if !filepath.IsAbs(p) {
			return
		}
		if real, err := filepath.EvalSymlinks(p); err == nil {
			read = append(read, real)
		}
	}
	for _, p := range slices.Concat(a.Trees, a.Path, a.Mapped) {
		add(p)
	}
	venvs := []string{filepath.Join(filepath.Dir(a.Executable), "pyvenv.cfg"),
		filepath.Join(filepath.Dir(filepath.Dir(a.Executable)), "pyvenv.cfg")}
	for _, p := range a.Prefixes {
		venvs = append(venvs, filepath.Join(p, "pyvenv.cfg"))
	}
	for _, p := range venvs {
		add(p)
	}
	read = slices.DeleteFunc(collapse(read), func(p string) bool { return slices.Contains(exec, p) })
	return ReadSet{Exec: exec, Read: read, Optional: slices.Clone(optionalReads)}, nil
}

// elfInterpreter is the loader bin names (PT_INTERP), symlinks resolved;
// "" for a static binary.
func elfInterpreter(bin string) (string, error) {
	f, err := elf.Open(bin)
	if err != nil {
		return "", fmt.Errorf("probe: read %s: %w", bin, err)
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, prog.Filesz)
		if _, err := prog.ReadAt(b, 0); err != nil {
			return "", fmt.Errorf("probe: read %s's interpreter: %w", bin, err)
		}
		real, err := filepath.EvalSymlinks(string(bytes.TrimRight(b, "\x00")))
		if err != nil {
			return "", fmt.Errorf("probe: %s's interpreter: %w", bin, err)
		}
		return real, nil
	}
	return "", nil
}

// collapse sorts paths, removes duplicates and drops every path below
// another one (a rule on a directory covers all of it).
func collapse(paths []string) []string {
	slices.Sort(paths)
	paths = slices.Compact(paths)
	all := slices.Clone(paths)
	return slices.DeleteFunc(paths, func(p string) bool {
		return slices.ContainsFunc(all, func(d string) bool { return d != p && Within(p, d) })
	})
}

// Within reports whether path is dir or lies below it (both clean and
// absolute).
func Within(path, dir string) bool {
	if dir == "/" {
		return true
	}
	return path == dir || strings.HasPrefix(path, dir+"/")
}

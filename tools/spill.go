package tools

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// SpillPrefix is the placeholder directory a result names its spill file
// under ("[Full output saved to: <spill>/spill-XXXXXXXXXX]"). read resolves
// <spill>/NAME through the SpillOpener of its call's context and nothing
// else; grep, find and ls do not see spills.
const SpillPrefix = "<spill>"

// SpillOpener opens the spill file name (the part after "<spill>/") for
// the calling run, read-only, without following a symlink or blocking on
// a FIFO. Its errors reach the script after the placeholder path, so they
// must name no host path; one wrapping fs.ErrNotExist is ErrNotFound.
type SpillOpener func(name string) (*os.File, error)

type spillKey struct{}

// WithSpills returns ctx carrying open, the spill files the call may read.
// A runtime sets it per run, so the scope of what read can reach is the
// run's, not the tool's.
func WithSpills(ctx context.Context, open SpillOpener) context.Context {
	return context.WithValue(ctx, spillKey{}, open)
}

func spillsOf(ctx context.Context) SpillOpener {
	open, _ := ctx.Value(spillKey{}).(SpillOpener)
	return open
}

// spillName checks the part after the prefix: exactly one path element of
// the form spill-XXXX (letters and digits), which rules out "..", further
// slashes, an absolute path and NUL.
func spillName(p string) (string, error) {
	rest, ok := strings.CutPrefix(p, SpillPrefix+"/")
	if !ok || rest == "" {
		return "", badParam("%q is not a spill path: use %s/spill-… as the result names it", p, SpillPrefix)
	}
	suffix, ok := strings.CutPrefix(rest, "spill-")
	if !ok || suffix == "" || strings.IndexFunc(suffix, func(c rune) bool {
		return !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9')
	}) >= 0 {
		return "", badParam("%q is not a spill path: use %s/spill-… as the result names it", p, SpillPrefix)
	}
	return rest, nil
}

// openSpill opens the spill p names for the run of ctx, a regular file only.
func openSpill(ctx context.Context, p string) (*os.File, fs.FileInfo, error) {
	name, err := spillName(p)
	if err != nil {
		return nil, nil, err
	}
	open := spillsOf(ctx)
	if open == nil {
		return nil, nil, newError(ErrNotFound, "%s: no spill files are readable here", p)
	}
	f, err := open(name)
	if err != nil {
		kind := error(nil)
		if errors.Is(err, fs.ErrNotExist) {
			kind = ErrNotFound
		}
		return nil, nil, &toolError{kind: kind, msg: fmt.Sprintf("%s: %s", p, err.Error()), cause: err}
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fsError(p, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, &toolError{kind: ErrNotRegular, msg: fmt.Sprintf("%s is %s, not a regular file", p, kindOf(fi.Mode()))}
	}
	return f, fi, nil
}

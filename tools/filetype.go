package tools

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// openFlags open a file for reading without ever blocking in open(2) or
// taking a terminal: O_NONBLOCK makes a FIFO that was swapped in after the
// type check open at once (and read as empty), O_NOCTTY keeps a planted
// terminal device from becoming the host's controlling terminal.
const openFlags = os.O_RDONLY | syscall.O_NONBLOCK | syscall.O_NOCTTY

// kindOf names a file type for messages: "a named pipe (FIFO)".
func kindOf(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m.IsRegular():
		return "a regular file"
	}
	return "an irregular file"
}

// irregularError is opening something that is not a regular file.
type irregularError struct{ mode fs.FileMode }

func (e *irregularError) Error() string { return kindOf(e.mode) + ", not a regular file" }

// openRegular opens rel for reading if it is a regular file, else fails
// with an *irregularError. The type is checked before the open, so a
// FIFO, a socket or a device is never opened at all, and again on the
// open descriptor, which catches a swap in between. Errors are the file
// system's (with host paths): callers turn them into script-facing ones.
func openRegular(rt *os.Root, rel string) (*os.File, fs.FileInfo, error) {
	fi, err := rt.Stat(rel)
	if err != nil {
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, &irregularError{fi.Mode()}
	}
	return openChecked(rt, rel)
}

// openChecked opens rel for reading and fails with an *irregularError
// unless the open descriptor is a regular file. It is for entries a
// directory listing already typed as regular files: the open cannot block
// (O_NONBLOCK) even if the entry was swapped for a FIFO since.
func openChecked(rt *os.Root, rel string) (*os.File, fs.FileInfo, error) {
	f, err := rt.OpenFile(rel, openFlags, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = &irregularError{fi.Mode()}
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// openShown is openRegular for a file the script named: failures are
// script-facing errors naming shown. A directory is a bad parameter (ls
// lists it); a FIFO, socket or device is ErrNotRegular, naming its type.
func openShown(rt *os.Root, rel, shown string) (*os.File, fs.FileInfo, error) {
	f, fi, err := openRegular(rt, rel)
	var irr *irregularError
	switch {
	case errors.As(err, &irr) && irr.mode.IsDir():
		return nil, nil, badParam("%s is a directory; use ls to list it", shown)
	case errors.As(err, &irr):
		return nil, nil, &toolError{kind: ErrNotRegular, msg: fmt.Sprintf("%s is %s, not a regular file", shown, kindOf(irr.mode))}
	case err != nil:
		return nil, nil, fsError(shown, err)
	}
	return f, fi, nil
}

package privatetmp

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/executecode/executecode/internal/privfs"
)

// ErrUnsafe reports a private object whose type, mode or owner is not what
// was asked for. Callers fail closed on it: nothing runs.
var ErrUnsafe = privfs.ErrUnsafe

const (
	dirMode  = 0o700
	fileMode = 0o600
	// suffixLen matches mktemp's ten X: 62^10 names make a collision with
	// a hostile pre-creation a matter of retries, not of luck.
	suffixLen   = 10
	maxAttempts = 100
	alphabet    = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
)

// randomSuffix is a variable so tests can force name collisions with
// planted objects and watch the retry.
var randomSuffix = newSuffix

// newSuffix draws ten characters uniformly from alphabet; bytes at or above
// the largest multiple of 62 are rejected so no character is favoured.
func newSuffix() string {
	const limit = 256 - 256%len(alphabet)
	var out [suffixLen]byte
	var buf [2 * suffixLen]byte
	n := 0
	for n < suffixLen {
		_, _ = rand.Read(buf[:]) // crypto/rand never fails on Linux
		for _, c := range buf {
			if int(c) >= limit {
				continue
			}
			out[n] = alphabet[int(c)%len(alphabet)]
			if n++; n == suffixLen {
				break
			}
		}
	}
	return string(out[:])
}

// ReserveDir creates <parent>/<prefix>-XXXXXXXXXX at exactly 0700 with
// exclusive creation and returns its path after validating type, mode and
// owner. A directory that fails validation is removed (it is ours: we just
// created it) and ErrUnsafe returned.
func ReserveDir(parent, prefix string) (string, error) {
	for range maxAttempts {
		path := filepath.Join(parent, prefix+"-"+randomSuffix())
		err := os.Mkdir(path, dirMode)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("reserve directory %s-*: %w", prefix, err)
		}
		if err := validateDir(path); err != nil {
			_ = os.Remove(path)
			return "", err
		}
		return path, nil
	}
	return "", fmt.Errorf("reserve directory %s-*: no free name after %d attempts", prefix, maxAttempts)
}

// ReserveFile creates <parent>/<prefix>-XXXXXXXXXX as a new regular file at
// exactly 0600 (O_EXCL|O_NOFOLLOW) and returns it open for writing.
func ReserveFile(parent, prefix string) (*os.File, error) {
	for range maxAttempts {
		path := filepath.Join(parent, prefix+"-"+randomSuffix())
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, fileMode)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reserve file %s-*: %w", prefix, err)
		}
		if err := validateOpenFile(f); err != nil {
			f.Close()
			_ = os.Remove(path)
			return nil, err
		}
		return f, nil
	}
	return nil, fmt.Errorf("reserve file %s-*: no free name after %d attempts", prefix, maxAttempts)
}

// WriteFile publishes data as <parent>/<name> atomically: it is written
// through a hidden private reservation and renamed into place, so readers
// never see half a file and a symlink planted at name is replaced, never
// followed. On failure the reservation is removed and name is untouched.
func WriteFile(parent, name string, data []byte) error {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, filepath.Separator) {
		return fmt.Errorf("write %q: %w: not a plain file name", name, fs.ErrInvalid)
	}
	f, err := ReserveFile(parent, "."+rootName(name)+"-")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	cerr := f.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp, filepath.Join(parent, name))
	}
	if werr != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", name, werr)
	}
	return nil
}

// rootName drops the extension the way the reference's Path.rootname does:
// a dot-file such as ".execute-code-owner" is all name and no extension.
func rootName(name string) string {
	ext := filepath.Ext(name)
	if ext == name {
		return name
	}
	return strings.TrimSuffix(name, ext)
}

// validateDir checks that path is a real directory (not a link), mode
// exactly 0700, owned by this process's effective uid.
func validateDir(path string) error { return validate(path, true) }

func validate(path string, wantDir bool) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return fmt.Errorf("validate private object: %w", err)
	}
	return checkInfo(filepath.Base(path), fi, wantDir)
}

func validateOpenFile(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("validate private object: %w", err)
	}
	return checkInfo(filepath.Base(f.Name()), fi, false)
}

func checkInfo(name string, fi fs.FileInfo, wantDir bool) error {
	return privfs.CheckInfo(name, fi, wantDir)
}

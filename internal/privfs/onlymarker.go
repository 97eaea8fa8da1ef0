package privfs

import (
	"errors"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// onlyMarker reports whether the directory holds its owner marker and
// nothing else, reading at most two names of a fresh listing.
func onlyMarker(dirfd int) bool {
	fd, err := unix.Openat(dirfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	f := os.NewFile(uintptr(fd), ".")
	defer f.Close()
	names, err := f.Readdirnames(2)
	if err != nil && !errors.Is(err, io.EOF) {
		return false
	}
	return len(names) == 1 && names[0] == MarkerName
}

// OnlyMarker reports whether the directory at path holds its owner marker
// and nothing else, reading at most two names; a link is never followed.
func OnlyMarker(path string) bool {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	return onlyMarker(fd)
}

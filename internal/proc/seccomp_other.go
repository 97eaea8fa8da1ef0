//go:build !amd64

package proc

// The filter's syscall list is written for amd64 only: elsewhere the
// sandbox fails closed rather than install a filter that misses a number.
const (
	seccompAuditArch = 0
	seccompX32Bit    = 0
)

var seccompDenied []seccompRule

package pump

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// ExceptionPrefix starts the name of the record the shim's excepthook
// leaves in the rpc directory when the script dies of an uncaught
// exception: exception-<mac>.json, {"type": "<class name>", "errno": <int
// or null>}. It is the bare kind, without the dash the numbered families
// have, because the record has no number: the dash belongs to the MAC
// field. pump owns this name; the shim writes it as its kind.
const ExceptionPrefix = KindException

const maxExceptionBytes = 4096

// Exception is the shim's record of an uncaught exception: its class name
// and, for OSError and its kin, the errno.
type Exception struct {
	Type     string
	Errno    int
	HasErrno bool
}

// ReadException reads the exception record of dir, whose bridge token is
// token: {"type": str, "errno": int|null} in a regular file (not a link)
// of at most 4 KiB named exception-<mac>.json, whose MAC authenticates its
// body. Anything else reports false; every exception*.json file that fails
// the name or the MAC is refused and onRefused (which may be nil) told of
// it, so a record planted by another session never decides this run's
// headline. A missing "errno" reads as null.
func ReadException(dir, token string, onRefused func()) (Exception, bool) {
	var names []string
	for _, name := range readNames(dir, ExceptionPrefix) {
		if strings.HasPrefix(name, ExceptionPrefix) && strings.HasSuffix(name, jsonSuffix) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var found Exception
	ok := false
	for _, name := range names {
		f, _ := parseFrameName(name, ExceptionPrefix)
		body, err := readBounded(filepath.Join(dir, name), false, maxExceptionBytes)
		if f.num != "" || err != nil || !validMAC(token, KindException, "", body, f.mac) {
			observe(onRefused)
			continue
		}
		if exc, valid := parseException(body); valid && !ok {
			found, ok = exc, true
		}
	}
	return found, ok
}

func parseException(body []byte) (Exception, bool) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) != nil || fields == nil || !isJSONString(fields["type"]) {
		return Exception{}, false
	}
	var exc Exception
	if json.Unmarshal(fields["type"], &exc.Type) != nil {
		return Exception{}, false
	}
	raw := bytes.TrimSpace(fields["errno"])
	if len(raw) == 0 || string(raw) == "null" {
		return exc, true
	}
	n, err := strconv.Atoi(string(raw))
	if err != nil {
		return Exception{}, false
	}
	exc.Errno, exc.HasErrno = n, true
	return exc, true
}

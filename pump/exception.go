package pump

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strconv"
)

// ExceptionFile is the record the shim's excepthook leaves in the rpc
// directory when the script dies of an uncaught exception.
const ExceptionFile = "exception.json"

const maxExceptionBytes = 4096

// Exception is the shim's record of an uncaught exception: its class name
// and, for OSError and its kin, the errno.
type Exception struct {
	Type     string
	Errno    int
	HasErrno bool
}

// ReadException reads dir/exception.json: {"type": str, "errno": int|null}.
// Only a regular file (not a link) of at most 4 KiB holding such an object
// counts; anything else reports false. A missing "errno" reads as null.
func ReadException(dir string) (Exception, bool) {
	body, err := readBounded(filepath.Join(dir, ExceptionFile), false, maxExceptionBytes)
	if err != nil {
		return Exception{}, false
	}
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

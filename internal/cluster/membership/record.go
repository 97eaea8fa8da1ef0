package membership

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/executecode/executecode/internal/cluster/wire"
	"github.com/executecode/executecode/internal/jsonerr"
)

// Bounds on a member record: anyone who can write under the prefix can
// put anything there, and a record is small.
const (
	maxRecordBytes  = 1024
	maxAddressBytes = 256
)

// record is a member as stored under the prefix: JSON, readable with
// etcdctl, keyed by the member's address.
type record struct {
	Address     *string `json:"address"`
	Incarnation *string `json:"incarnation"`
	Capacity    *int    `json:"capacity"`
}

// encodeMember is the value a member registers, after the checks a
// reader makes, so a node never registers what its peers would refuse.
func encodeMember(m Member) ([]byte, error) {
	if err := m.check(); err != nil {
		return nil, err
	}
	return json.Marshal(m)
}

// decodeMember reads the record stored at name (the key without the
// prefix), refusing anything but a well-formed member stored at its own
// address. Errors wrap ErrMalformed and never quote the value.
func decodeMember(name string, value []byte) (Member, error) {
	if len(value) > maxRecordBytes {
		return Member{}, fmt.Errorf("%w: %d bytes (at most %d)", ErrMalformed, len(value), maxRecordBytes)
	}
	var r record
	if problem := jsonerr.DecodeStrict(value, &r, "record"); problem != "" {
		return Member{}, fmt.Errorf("%w: %s", ErrMalformed, problem)
	}
	switch {
	case r.Address == nil:
		return Member{}, fmt.Errorf("%w: no address", ErrMalformed)
	case r.Incarnation == nil:
		return Member{}, fmt.Errorf("%w: no incarnation", ErrMalformed)
	case r.Capacity == nil:
		return Member{}, fmt.Errorf("%w: no capacity", ErrMalformed)
	}
	m := Member{Address: *r.Address, Incarnation: *r.Incarnation, Capacity: *r.Capacity}
	if err := m.check(); err != nil {
		return Member{}, err
	}
	// The key is the address: one record per address, so a node
	// restarted there replaces its predecessor's record.
	if name != m.Address {
		return Member{}, fmt.Errorf("%w: the record's address is not its key's", ErrMalformed)
	}
	return m, nil
}

func (m Member) check() error {
	if err := checkAddress(m.Address); err != nil {
		return err
	}
	if !wire.ValidIncarnation(m.Incarnation) {
		return fmt.Errorf("%w: %s", ErrMalformed, wire.BadIncarnation)
	}
	if p := wire.CapacityProblem(m.Capacity); p != "" {
		return fmt.Errorf("%w: %s", ErrMalformed, p)
	}
	return nil
}

// checkAddress: a node's address as the wire takes it (wire.AddressProblem),
// and printable text with no slash, since it is a key's last part.
func checkAddress(a string) error {
	if a == "" || len(a) > maxAddressBytes || !utf8.ValidString(a) {
		return fmt.Errorf("%w: address is empty, too long or not text", ErrMalformed)
	}
	if strings.ContainsFunc(a, func(r rune) bool { return r <= 0x20 || r == 0x7f || r == '/' }) {
		return fmt.Errorf("%w: address has a space, a control character or a slash", ErrMalformed)
	}
	if p := wire.AddressProblem(a); p != "" {
		return fmt.Errorf("%w: address %s", ErrMalformed, p)
	}
	return nil
}

// printable bounds and quotes a string from a record or a key for a log
// line or an error.
func printable(s string) string { return jsonerr.Quote(s) }

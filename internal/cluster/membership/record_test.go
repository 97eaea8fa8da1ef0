package membership

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDecodeMember(t *testing.T) {
	good := `{"address":"127.0.0.1:7001","incarnation":"n-1_a","capacity":4}`
	m, err := decodeMember("127.0.0.1:7001", []byte(good))
	require.NoError(t, err)
	assert.Equal(t, Member{Address: "127.0.0.1:7001", Incarnation: "n-1_a", Capacity: 4}, m)
	m, err = decodeMember("[::1]:7001", []byte(`{"address":"[::1]:7001","incarnation":"a","capacity":1}`))
	require.NoError(t, err)
	assert.Equal(t, "[::1]:7001", m.Address)

	for name, c := range map[string]struct {
		key, value, says string
	}{
		"garbage":         {"127.0.0.1:7001", "\xff\xfe\x00garbage", "not JSON at byte 1"},
		"huge":            {"127.0.0.1:7001", `{"address":"` + strings.Repeat("a", 4096) + `"}`, "4110 bytes (at most 1024)"},
		"wrong type":      {"127.0.0.1:7001", `{"address":"127.0.0.1:7001","incarnation":"a","capacity":"4"}`, `field "capacity" has the wrong type`},
		"wrong type addr": {"127.0.0.1:7001", `{"address":7001,"incarnation":"a","capacity":4}`, `field "address" has the wrong type`},
		"unknown field":   {"127.0.0.1:7001", `{"address":"127.0.0.1:7001","incarnation":"a","capacity":4,"admin\u001b":true}`, `unknown field "admin\x1b"`},
		"array":           {"127.0.0.1:7001", `[1]`, "not a JSON object"},
		"null":            {"127.0.0.1:7001", `null`, "no address"},
		"empty":           {"127.0.0.1:7001", ``, "empty or cut short"},
		"cut short":       {"127.0.0.1:7001", `{"address":"127.0.0.1:7001"`, "empty or cut short"},
		"trailing":        {"127.0.0.1:7001", good + `{}`, "data after the record"},
		"no incarnation":  {"127.0.0.1:7001", `{"address":"127.0.0.1:7001","capacity":4}`, "no incarnation"},
		"no capacity":     {"127.0.0.1:7001", `{"address":"127.0.0.1:7001","incarnation":"a"}`, "no capacity"},
		"bad incarnation": {"127.0.0.1:7001", `{"address":"127.0.0.1:7001","incarnation":"a b","capacity":4}`, "incarnation is not"},
		"zero capacity":   {"127.0.0.1:7001", `{"address":"127.0.0.1:7001","incarnation":"a","capacity":0}`, "capacity 0 is not between"},
		"huge capacity":   {"127.0.0.1:7001", `{"address":"127.0.0.1:7001","incarnation":"a","capacity":99999999}`, "capacity 99999999"},
		"overflow":        {"127.0.0.1:7001", `{"address":"127.0.0.1:7001","incarnation":"a","capacity":1e400}`, `field "capacity" has the wrong type`},
		"no port":         {"127.0.0.1", `{"address":"127.0.0.1","incarnation":"a","capacity":4}`, "not host:port"},
		"port zero":       {"127.0.0.1:0", `{"address":"127.0.0.1:0","incarnation":"a","capacity":4}`, "no valid port"},
		"port padded":     {"127.0.0.1:07001", `{"address":"127.0.0.1:07001","incarnation":"a","capacity":4}`, "no valid port"},
		"slash":           {"a/b:1", `{"address":"a/b:1","incarnation":"a","capacity":4}`, "slash"},
		"control":         {"a\x1b:1", `{"address":"a\u001b:1","incarnation":"a","capacity":4}`, "control character"},
		"other key":       {"127.0.0.1:7002", good, "not its key's"},
	} {
		_, err := decodeMember(c.key, []byte(c.value))
		require.ErrorIs(t, err, ErrMalformed, name)
		assert.Contains(t, err.Error(), c.says, name)
		assert.NotContains(t, err.Error(), "garbage", name)
		assert.NotContains(t, err.Error(), "aaaaaaaa", name)
		assert.NotContains(t, err.Error(), "\x1b", name)
	}
}

func TestEncodeMemberRoundTrips(t *testing.T) {
	m := Member{Address: "node-1.example:7001", Incarnation: "abc", Capacity: 8}
	b, err := encodeMember(m)
	require.NoError(t, err)
	got, err := decodeMember(m.Address, b)
	require.NoError(t, err)
	assert.Equal(t, m, got)
	_, err = encodeMember(Member{Address: "x", Incarnation: "abc", Capacity: 8})
	assert.ErrorIs(t, err, ErrMalformed)
}

// FuzzDecodeMember feeds the decoder any key and value, as anyone with
// write access to etcd could: nothing panics, a refusal is ErrMalformed
// with a short message, and what is accepted is a valid member stored at
// its own address that encodes back to itself.
func FuzzDecodeMember(f *testing.F) {
	f.Add("127.0.0.1:7001", []byte(`{"address":"127.0.0.1:7001","incarnation":"a","capacity":4}`))
	f.Fuzz(func(t *testing.T, name string, value []byte) {
		m, err := decodeMember(name, value)
		if err != nil {
			if !strings.HasPrefix(err.Error(), ErrMalformed.Error()) || len(err.Error()) > 200 {
				t.Fatalf("refusal %q", err)
			}
			return
		}
		if m.check() != nil || m.Address != name {
			t.Fatalf("accepted %+v under %q", m, name)
		}
		b, err := encodeMember(m)
		if err != nil {
			t.Fatal(err)
		}
		again, err := decodeMember(name, b)
		if err != nil || again != m {
			t.Fatalf("%+v encoded to a record read as %+v, %v", m, again, err)
		}
	})
}

package reexec

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseGuardLineAcceptsOnlyWellFormedLines(t *testing.T) {
	for _, tc := range []struct {
		line string
		want GuardLine
		ok   bool
	}{
		{"+1234", GuardLine{Op: GuardAdd, SID: 1234}, true},
		{"-99", GuardLine{Op: GuardForget, SID: 99}, true},
		{"!77", GuardLine{Op: GuardSweep, SID: 77}, true},
		{`r"/tmp/lemon-private-abc"`, GuardLine{Op: GuardRoot, Root: "/tmp/lemon-private-abc"}, true},
		{`r"/tmp/with\nnewline"`, GuardLine{Op: GuardRoot, Root: "/tmp/with\nnewline"}, true},
		{"q", GuardLine{Op: GuardQuit}, true},
		{"", GuardLine{}, false},
		{"+", GuardLine{}, false},
		{"*12", GuardLine{}, false},
		{"+12x", GuardLine{}, false},
		{"+-12", GuardLine{}, false},
		{"++12", GuardLine{}, false},
		{"+1", GuardLine{}, false}, // init's session is never ours
		{"+0", GuardLine{}, false},
		{"+99999999999999999999", GuardLine{}, false},
		{`r"relative/lemon-private-x"`, GuardLine{}, false},
		{`r"/tmp/../etc"`, GuardLine{}, false},
		{`r"/tmp/x/"`, GuardLine{}, false},
		{`r/tmp/unquoted`, GuardLine{}, false},
		{`r""`, GuardLine{}, false},
		{"qq", GuardLine{}, false},
	} {
		got, err := ParseGuardLine([]byte(tc.line))
		if !tc.ok {
			assert.True(t, errors.Is(err, ErrGuardLine), "%q: %v", tc.line, err)
			continue
		}
		require.NoError(t, err, tc.line)
		assert.Equal(t, tc.want, got, tc.line)
	}
}

func TestGuardLinesRoundTrip(t *testing.T) {
	b := AppendGuardLine(AppendGuardLine(nil, GuardAdd, 4242), GuardForget, 17)
	b = AppendGuardRoot(b, "/dev/shm/lemon-private-x\ny")
	b = AppendGuardQuit(b)
	assert.Equal(t, "+4242\n-17\nr\"/dev/shm/lemon-private-x\\ny\"\nq\n", string(b))
	l, err := ParseGuardLine([]byte(`r"/dev/shm/lemon-private-x\ny"`))
	require.NoError(t, err)
	assert.Equal(t, "/dev/shm/lemon-private-x\ny", l.Root)
}

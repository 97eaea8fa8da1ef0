package reexec

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseGuardLineAcceptsOnlySignedSessionIDs(t *testing.T) {
	for _, tc := range []struct {
		line string
		add  bool
		sid  int
		ok   bool
	}{
		{"+1234", true, 1234, true},
		{"-99", false, 99, true},
		{"", false, 0, false},
		{"+", false, 0, false},
		{"*12", false, 0, false},
		{"+12x", false, 0, false},
		{"+-12", false, 0, false},
		{"+1", false, 0, false}, // init's session is never ours
		{"+0", false, 0, false},
		{"+99999999999999999999", false, 0, false},
	} {
		add, sid, err := ParseGuardLine([]byte(tc.line))
		if !tc.ok {
			assert.True(t, errors.Is(err, ErrGuardLine), "%q: %v", tc.line, err)
			continue
		}
		require.NoError(t, err, tc.line)
		assert.Equal(t, tc.add, add, tc.line)
		assert.Equal(t, tc.sid, sid, tc.line)
	}
}

func TestGuardLinesRoundTrip(t *testing.T) {
	b := AppendGuardLine(AppendGuardLine(nil, '+', 4242), '-', 17)
	assert.Equal(t, "+4242\n-17\n", string(b))
}

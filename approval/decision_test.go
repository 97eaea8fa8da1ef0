package approval

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseDecisionAcceptsTheFiveNamesAndAllow(t *testing.T) {
	tests := []struct {
		in   string
		want Decision
	}{
		{"allow", ApproveOnce},
		{"approve_once", ApproveOnce},
		{"approve_session", ApproveSession},
		{"approve_agent", ApproveAgent},
		{"approve_global", ApproveGlobal},
		{"deny", Deny},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseDecision(tt.in)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParseDecisionRefusesEverythingElse(t *testing.T) {
	for _, in := range []string{"", "ask", "Allow", "DENY", "cancelled", "timeout", " deny", "approve_node"} {
		t.Run(in, func(t *testing.T) {
			_, err := ParseDecision(in)
			assert.ErrorIs(t, err, ErrInvalidDecision)
		})
	}
}

func TestNewIDIsAPrefixedRandomUUID(t *testing.T) {
	shape := regexp.MustCompile(`^appr_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for range 1000 {
		id := NewID()
		require.Regexp(t, shape, id)
		require.False(t, seen[id], "id repeated")
		seen[id] = true
	}
}

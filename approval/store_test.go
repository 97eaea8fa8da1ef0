package approval

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Stored approvals are bounded: past maxStored the oldest grant goes (its
// next call is asked again), every newer one still answers, and a grant
// stored twice counts once.
func TestStoredApprovalsDropTheOldestPastTheCap(t *testing.T) {
	s := newStore()
	hash := argsHash(map[string]any{"path": "a"})
	for i := range maxStored + 5 {
		s.install(ApproveSession, "read", hash, "s"+strconv.Itoa(i), "agent")
	}
	s.install(ApproveSession, "read", hash, "s"+strconv.Itoa(maxStored+4), "agent")
	assert.Equal(t, maxStored, s.len())
	for i := range 5 {
		_, ok := s.lookup("read", hash, "s"+strconv.Itoa(i), "other")
		assert.False(t, ok, "grant %d is among the oldest and was dropped", i)
	}
	for _, i := range []int{5, maxStored / 2, maxStored + 4} {
		scope, ok := s.lookup("read", hash, "s"+strconv.Itoa(i), "other")
		assert.True(t, ok, "grant %d is kept", i)
		assert.Equal(t, ApproveSession, scope)
	}
	assert.LessOrEqual(t, len(s.order)-s.head, maxStored)
	assert.LessOrEqual(t, len(s.order), 2*maxStored+1, "the dropped prefix is compacted away")
}

package executecode

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/executecode/executecode/registry"
)

// A session call runs isolated only when it failed before its cell could
// start, and the reason names where it failed: a reset whose old kernel
// could not be confirmed gone is stop_failed, but the same error met
// while acquiring is the registry's failure to answer.
func TestFallbackForDecidesFromWhereTheCallFailed(t *testing.T) {
	unavailable := fmt.Errorf("%w: %w", registry.ErrUnavailable, context.DeadlineExceeded)
	tests := []struct {
		name string
		err  error
		want FallbackReason
	}{
		{"no owner", &notStarted{step: stepScope, err: errNoScope}, FallbackMissingScope},
		{"reset unanswered", &notStarted{step: stepReset, err: unavailable}, FallbackRegistryUnavailable},
		{"reset stop unconfirmed", &notStarted{step: stepReset, err: registry.ErrStopFailed}, FallbackStopFailed},
		{"bridge not staged", &notStarted{step: stepBridge, err: fmt.Errorf("reserve: %w", context.Canceled)}, FallbackStartupFailed},
		{"acquire unanswered", &notStarted{step: stepAcquire, err: unavailable}, FallbackRegistryUnavailable},
		{"capacity", &notStarted{step: stepAcquire, err: fmt.Errorf("acquire: %w", registry.ErrCapacityExhausted)}, FallbackCapacityExhausted},
		{"kernel start failed", &notStarted{step: stepAcquire, err: fmt.Errorf("acquire: %w", registry.ErrStartupFailed)}, FallbackStartupFailed},
		{"acquire met a failed stop", &notStarted{step: stepAcquire, err: registry.ErrStopFailed}, FallbackRegistryUnavailable},
		{"acquire refused otherwise", &notStarted{step: stepAcquire, err: context.Canceled}, FallbackRegistryUnavailable},
		{"kernel never ready", &notStarted{step: stepStart, err: registry.ErrStartupFailed}, FallbackStartupFailed},
		{"wrapped", fmt.Errorf("session: %w", &notStarted{step: stepScope, err: errNoScope}), FallbackMissingScope},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := fallbackFor(tc.err)
			assert.True(t, ok)
			assert.Equal(t, tc.want, got)
		})
	}
}

// Every other error is the tool's error: nothing runs isolated after a
// failure that is not a session's, or after code may have started.
func TestFallbackForLeavesOtherErrorsAlone(t *testing.T) {
	for _, err := range []error{nil, ErrWorkspace, fmt.Errorf("execute_code runner crashed: %w", context.Canceled),
		registry.ErrStartupFailed, &resetRefused{registry.ErrInvalidRequest}} {
		_, ok := fallbackFor(err)
		assert.False(t, ok, "%v", err)
	}
}

package registry

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// BenchmarkAdmission measures one admission at the cap: a new key evicts
// the least-recently-used idle kernel and starts a (fake) worker, then
// its lease is released. The cost must not grow with the number of live
// kernels (the target: 10,000 keys within 2x of 10 keys).
func BenchmarkAdmission(b *testing.B) {
	for _, live := range []int{10, 10_000} {
		b.Run(fmt.Sprintf("live=%d", live), func(b *testing.B) {
			h := newHarness(b)
			owner := h.newOwner()
			base := h.key("bench")
			key := func(i int) Key {
				k := base
				k.ScopeID = "s" + strconv.Itoa(i)
				return k
			}
			for i := range live {
				a := h.mustAcquire(key(i), owner, withMax(live))
				require.NoError(b, h.release(a.Lease))
			}
			require.Equal(b, live, h.snapshot().Live)

			next := live
			for b.Loop() {
				a := h.mustAcquire(key(next), owner, withMax(live))
				if err := h.release(a.Lease); err != nil {
					b.Fatal(err)
				}
				next++
			}
			b.StopTimer()
			require.Equal(b, live, h.snapshot().Live)
		})
	}
}

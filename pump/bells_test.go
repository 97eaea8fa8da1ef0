package pump

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

func TestBellsCoalesceAFloodIntoOnePendingWakeUp(t *testing.T) {
	b, err := NewBells()
	require.NoError(t, err)
	defer b.Close()
	w := b.ChildFiles()[0]
	for range 1000 {
		_, err := w.Write([]byte{1})
		require.NoError(t, err)
	}
	// With the writer gone the drain reads everything, sees EOF and ends;
	// then exactly one wake-up is pending.
	require.NoError(t, b.CloseChildEnds())
	<-b.drained
	assert.Len(t, b.wake, 1)
}

func TestRingIsReadableOnTheChildsEndAndNeverBlocks(t *testing.T) {
	b, err := NewBells()
	require.NoError(t, err)
	defer b.Close()
	r := b.ChildFiles()[1]
	b.Ring()
	buf := make([]byte, 8)
	n, err := r.Read(buf)
	require.NoError(t, err)
	assert.Equal(t, []byte{1}, buf[:n])

	// Far more rings than a pipe holds: each returns at once.
	for range 200000 {
		b.Ring()
	}
}

func TestRingAfterTheChildIsGoneIsHarmless(t *testing.T) {
	b, err := NewBells()
	require.NoError(t, err)
	require.NoError(t, b.CloseChildEnds())
	b.Ring() // EPIPE, not SIGPIPE
	require.NoError(t, b.Close())
}

func TestBellsHostEndsAreNonBlockingAndCloseOnExec(t *testing.T) {
	b, err := NewBells()
	require.NoError(t, err)
	defer b.Close()
	for _, f := range []*os.File{b.reqRead, b.respWrite} {
		rc, err := f.SyscallConn() // Fd() would make the file blocking
		require.NoError(t, err)
		require.NoError(t, rc.Control(func(fd uintptr) {
			fdFlags, err := unix.FcntlInt(fd, unix.F_GETFD, 0)
			require.NoError(t, err)
			assert.NotZero(t, fdFlags&unix.FD_CLOEXEC)
			flFlags, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
			require.NoError(t, err)
			assert.NotZero(t, flFlags&unix.O_NONBLOCK)
		}))
	}
}

func TestBellsCloseLeavesNoGoroutineAndIsIdempotent(t *testing.T) {
	opts := goleak.IgnoreCurrent()
	b, err := NewBells()
	require.NoError(t, err)
	b.Ring()
	require.NoError(t, b.Close())
	require.NoError(t, b.Close())
	goleak.VerifyNone(t, opts)
}

func TestNilBellsAreInert(t *testing.T) {
	var b *Bells
	b.Ring()
	assert.Nil(t, b.Wake())
	assert.NoError(t, b.Close())
}

// received reports whether a wake-up is pending on ch, without waiting.
func received(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// nextWake waits for a wake-up with a generous hang guard.
func nextWake(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("no wake-up")
	}
}

func TestEveryRingWakesEverySubscriberAndTheWakeChannel(t *testing.T) {
	opts := goleak.IgnoreCurrent()
	b, err := NewBells()
	require.NoError(t, err)
	first, cancelFirst := b.Subscribe()
	second, cancelSecond := b.Subscribe()
	defer cancelSecond()

	ringHost(t, b)
	nextWake(t, first)
	nextWake(t, second)
	nextWake(t, b.Wake())

	cancelFirst()
	cancelFirst() // idempotent
	ringHost(t, b)
	nextWake(t, second)
	nextWake(t, b.Wake())

	// Close waits for the drain goroutine, so every broadcast of that
	// ring is over: a cancelled subscription got none of it.
	require.NoError(t, b.Close())
	assert.False(t, received(first), "a cancelled subscription is not woken")
	goleak.VerifyNone(t, opts)
}

func TestSubscribersCoalesceAFloodIndependently(t *testing.T) {
	b, err := NewBells()
	require.NoError(t, err)
	sub, cancel := b.Subscribe()
	defer cancel()
	w := b.ChildFiles()[0]
	for range 1000 {
		_, err := w.Write([]byte{1})
		require.NoError(t, err)
	}
	require.NoError(t, b.CloseChildEnds())
	<-b.drained
	assert.Len(t, sub, 1, "one pending wake-up, however many rings")
	assert.Len(t, b.wake, 1)
	require.NoError(t, b.Close())
}

func TestNilBellsSubscriptionNeverWakes(t *testing.T) {
	var b *Bells
	ch, cancel := b.Subscribe()
	assert.Nil(t, ch)
	cancel()
}

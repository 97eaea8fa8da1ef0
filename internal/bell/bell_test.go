package bell

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

// ringHost is what the shim does after publishing a frame.
func ringHost(t *testing.T, b *Pair) {
	t.Helper()
	_, err := b.ChildFiles()[0].Write([]byte{1})
	require.NoError(t, err)
}

func TestBellsCoalesceAFloodIntoOnePendingWakeUp(t *testing.T) {
	b, err := New()
	require.NoError(t, err)
	defer b.Close()
	wake, cancel := b.Subscribe()
	defer cancel()
	w := b.ChildFiles()[0]
	for range 1000 {
		_, err := w.Write([]byte{1})
		require.NoError(t, err)
	}
	// With the writer gone the drain reads everything, sees EOF and ends;
	// then exactly one wake-up is pending.
	require.NoError(t, b.CloseChildEnds())
	<-b.drained
	assert.Len(t, wake, 1)
}

func TestRingIsReadableOnTheChildsEndAndNeverBlocks(t *testing.T) {
	b, err := New()
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
	b, err := New()
	require.NoError(t, err)
	require.NoError(t, b.CloseChildEnds())
	b.Ring() // EPIPE, not SIGPIPE
	require.NoError(t, b.Close())
}

func TestBellsHostEndsAreNonBlockingAndCloseOnExec(t *testing.T) {
	b, err := New()
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
	b, err := New()
	require.NoError(t, err)
	b.Ring()
	require.NoError(t, b.Close())
	require.NoError(t, b.Close())
	goleak.VerifyNone(t, opts)
}

func TestNilBellsAreInert(t *testing.T) {
	var b *Pair
	b.Ring()
	wake, cancel := b.Subscribe()
	assert.Nil(t, wake)
	cancel()
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

func TestEveryRingWakesEverySubscriber(t *testing.T) {
	opts := goleak.IgnoreCurrent()
	b, err := New()
	require.NoError(t, err)
	first, cancelFirst := b.Subscribe()
	second, cancelSecond := b.Subscribe()
	defer cancelSecond()
	third, cancelThird := b.Subscribe()
	defer cancelThird()

	ringHost(t, b)
	nextWake(t, first)
	nextWake(t, second)
	nextWake(t, third)

	cancelFirst()
	cancelFirst() // idempotent
	ringHost(t, b)
	nextWake(t, second)
	nextWake(t, third)

	// Close waits for the drain goroutine, so every broadcast of that
	// ring is over: a cancelled subscription got none of it.
	require.NoError(t, b.Close())
	assert.False(t, received(first), "a cancelled subscription is not woken")
	goleak.VerifyNone(t, opts)
}

func TestSubscribersCoalesceAFloodIndependently(t *testing.T) {
	b, err := New()
	require.NoError(t, err)
	sub, cancel := b.Subscribe()
	defer cancel()
	other, cancelOther := b.Subscribe()
	defer cancelOther()
	w := b.ChildFiles()[0]
	for range 1000 {
		_, err := w.Write([]byte{1})
		require.NoError(t, err)
	}
	require.NoError(t, b.CloseChildEnds())
	<-b.drained
	assert.Len(t, sub, 1, "one pending wake-up, however many rings")
	assert.Len(t, other, 1)
	require.NoError(t, b.Close())
}

// A server subscribes after its interpreter has started: a request rung
// for in between must not wait for the fallback poll.
func TestARingNobodyHeardIsPendingForTheFirstSubscriberOnly(t *testing.T) {
	b, err := New()
	require.NoError(t, err)
	for range 3 {
		ringHost(t, b)
	}
	require.NoError(t, b.CloseChildEnds())
	<-b.drained // every ring is read, with nobody subscribed

	first, cancelFirst := b.Subscribe()
	defer cancelFirst()
	assert.True(t, received(first), "the unheard rings are one pending wake-up")
	assert.False(t, received(first))
	second, cancelSecond := b.Subscribe()
	defer cancelSecond()
	assert.False(t, received(second), "handed over once")
	require.NoError(t, b.Close())
}

func TestARingWithASubscriberIsNotKeptForTheNextOne(t *testing.T) {
	b, err := New()
	require.NoError(t, err)
	defer b.Close()
	first, cancelFirst := b.Subscribe()
	ringHost(t, b)
	nextWake(t, first)
	cancelFirst()
	second, cancelSecond := b.Subscribe()
	defer cancelSecond()
	assert.False(t, received(second), "the ring was heard")
}

func TestNilBellsSubscriptionNeverWakes(t *testing.T) {
	var b *Pair
	ch, cancel := b.Subscribe()
	assert.Nil(t, ch)
	cancel()
}

// ringName is what the shim writes after publishing request name.
func ringName(t *testing.T, b *Pair, names ...string) {
	t.Helper()
	var buf []byte
	for _, n := range names {
		buf = append(buf, n...)
		buf = append(buf, '\n')
	}
	_, err := b.ChildFiles()[0].Write(buf)
	require.NoError(t, err)
}

// takeUntil takes from s until want names arrived (or a plain ring did,
// when wantLook), with a hang guard.
func takeUntil(t *testing.T, s *Subscription, want int, wantLook bool) ([]string, bool) {
	t.Helper()
	var names []string
	look := false
	for len(names) < want || wantLook && !look {
		nextWake(t, s.C)
		n, l := s.Take()
		names = append(names, n...)
		look = look || l
	}
	return names, look
}

func TestANamedRingReachesEveryListenerWithItsName(t *testing.T) {
	b, err := New()
	require.NoError(t, err)
	defer b.Close()
	first, second := b.Listen(), b.Listen()
	defer first.Cancel()
	defer second.Cancel()
	ringName(t, b, "3-"+mac)
	for _, s := range []*Subscription{first, second} {
		names, look := takeUntil(t, s, 1, false)
		assert.Equal(t, []string{"3-" + mac}, names)
		assert.False(t, look, "a named ring asks for no listing")
	}
	names, look := first.Take()
	assert.Empty(t, names, "taken once")
	assert.False(t, look)
}

func TestAPlainRingAsksListenersToLook(t *testing.T) {
	b, err := New()
	require.NoError(t, err)
	defer b.Close()
	s := b.Listen()
	defer s.Cancel()
	ringHost(t, b)
	names, look := takeUntil(t, s, 0, true)
	assert.Empty(t, names)
	assert.True(t, look)
}

func TestAFloodOfNamesIsBoundedAndBecomesALook(t *testing.T) {
	b, err := New()
	require.NoError(t, err)
	s := b.Listen()
	defer s.Cancel()
	var names []string
	for i := range 10 * MaxPending {
		names = append(names, fmt.Sprintf("%d-%s", i, mac))
	}
	w := b.ChildFiles()[0]
	for _, n := range names {
		_, err := w.Write([]byte(n + "\n"))
		require.NoError(t, err)
	}
	require.NoError(t, b.CloseChildEnds())
	<-b.drained
	got, look := s.Take()
	assert.Len(t, got, MaxPending, "never more than MaxPending names held")
	assert.Equal(t, names[:MaxPending], got, "in the order rung")
	assert.True(t, look, "the names dropped are found by a listing")
	require.NoError(t, b.Close())
}

func TestNamesRungBeforeAnyoneListenedGoToTheFirstListener(t *testing.T) {
	b, err := New()
	require.NoError(t, err)
	ringName(t, b, "1-"+mac, "2-"+mac)
	require.NoError(t, b.CloseChildEnds())
	<-b.drained
	first := b.Listen()
	defer first.Cancel()
	assert.True(t, received(first.C))
	names, look := first.Take()
	assert.Equal(t, []string{"1-" + mac, "2-" + mac}, names)
	assert.False(t, look)
	second := b.Listen()
	defer second.Cancel()
	assert.False(t, received(second.C), "handed over once")
	require.NoError(t, b.Close())
}

func TestAWakeOnlySubscriberKeepsNoNames(t *testing.T) {
	b, err := New()
	require.NoError(t, err)
	wake, cancel := b.Subscribe()
	defer cancel()
	for i := range 4 * MaxPending {
		ringName(t, b, fmt.Sprintf("%d-%s", i, mac))
	}
	require.NoError(t, b.CloseChildEnds())
	<-b.drained
	assert.Len(t, wake, 1)
	b.subMu.Lock()
	for s := range b.subs {
		assert.Empty(t, s.pending.names)
	}
	b.subMu.Unlock()
	require.NoError(t, b.Close())
}

func TestACancelledListenerHearsNothingMore(t *testing.T) {
	opts := goleak.IgnoreCurrent()
	b, err := New()
	require.NoError(t, err)
	s := b.Listen()
	other := b.Listen()
	s.Cancel()
	s.Cancel() // idempotent
	ringName(t, b, "9-"+mac)
	takeUntil(t, other, 1, false)
	other.Cancel()
	require.NoError(t, b.Close())
	assert.False(t, received(s.C))
	names, look := s.Take()
	assert.Empty(t, names)
	assert.False(t, look)
	goleak.VerifyNone(t, opts)
}

func TestNilBellsListenerNeverWakes(t *testing.T) {
	var b *Pair
	s := b.Listen()
	assert.Nil(t, s.C)
	names, look := s.Take()
	assert.Empty(t, names)
	assert.False(t, look)
	s.Cancel()
}

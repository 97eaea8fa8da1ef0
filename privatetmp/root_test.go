package privatetmp

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func openTestRoot(t *testing.T, tmp string) *Root {
	t.Helper()
	r, err := OpenRoot(RootOptions{TmpDir: tmp, NodeName: "node-a"})
	require.NoError(t, err)
	return r
}

func TestOpenRootCreatesAPrivateRootWithOwnerMarker(t *testing.T) {
	for _, mask := range []int{0o022, 0o077} {
		t.Run(fs.FileMode(mask).String(), func(t *testing.T) {
			tmp := t.TempDir()
			withUmask(t, mask)

			r := openTestRoot(t, tmp)

			assert.Equal(t, tmp, filepath.Dir(r.Path()))
			assert.Regexp(t, `^execute-code-private-[A-Za-z0-9]{10}$`, filepath.Base(r.Path()))
			assert.Equal(t, fs.FileMode(0o700), perm(t, r.Path()))
			marker := filepath.Join(r.Path(), markerName)
			assert.Equal(t, fs.FileMode(0o600), perm(t, marker))
			content, err := os.ReadFile(marker)
			require.NoError(t, err)
			assert.Equal(t, "node-a\n"+strconv.Itoa(os.Getpid())+"\n", string(content))
			assert.Equal(t, []string{markerName}, names(t, r.Path()), "no reservation left behind")
			assert.NoError(t, r.Validate())
		})
	}
}

func TestOpenRootNamesTheHostWhenNoNodeNameIsGiven(t *testing.T) {
	host, err := os.Hostname()
	require.NoError(t, err)
	r, err := OpenRoot(RootOptions{TmpDir: t.TempDir()})
	require.NoError(t, err)

	content, err := os.ReadFile(filepath.Join(r.Path(), markerName))
	require.NoError(t, err)
	assert.Equal(t, host+"\n"+strconv.Itoa(os.Getpid())+"\n", string(content))
}

func TestOpenRootRefusesANodeNameThatBreaksTheMarker(t *testing.T) {
	tmp := t.TempDir()
	for _, node := range []string{"two\nlines", "cr\r", " padded"} {
		_, err := OpenRoot(RootOptions{TmpDir: tmp, NodeName: node})
		assert.Error(t, err, "node %q", node)
	}
	assert.Empty(t, names(t, tmp))
}

func TestOpenRootFailsClosedWhenTheUmaskStripsOwnerBits(t *testing.T) {
	for _, mask := range []int{0o177, 0o277} {
		t.Run(fs.FileMode(mask).String(), func(t *testing.T) {
			tmp := t.TempDir()
			withUmask(t, mask)

			_, err := OpenRoot(RootOptions{TmpDir: tmp, NodeName: "n"})

			assert.ErrorIs(t, err, ErrUnsafe)
			assert.Empty(t, names(t, tmp), "a root that failed is removed")
		})
	}
}

func TestOpenRootLogsTheRootPathOnlyAtDebugLevel(t *testing.T) {
	var buf bytes.Buffer
	logger := zerolog.New(&buf).Level(zerolog.InfoLevel)
	r, err := OpenRoot(RootOptions{TmpDir: t.TempDir(), NodeName: "n", Logger: &logger})
	require.NoError(t, err)
	assert.NotContains(t, buf.String(), r.Path())

	buf.Reset()
	debug := zerolog.New(&buf).Level(zerolog.DebugLevel)
	r, err = OpenRoot(RootOptions{TmpDir: t.TempDir(), NodeName: "n", Logger: &debug})
	require.NoError(t, err)
	assert.Contains(t, buf.String(), r.Path())
}

func TestRootValidateFailsClosed(t *testing.T) {
	cases := []struct {
		name  string
		chown bool
		spoil func(t *testing.T, root string)
	}{
		{"root mode 0755", false, func(t *testing.T, root string) {
			require.NoError(t, os.Chmod(root, 0o755))
		}},
		{"root removed", false, func(t *testing.T, root string) {
			require.NoError(t, os.RemoveAll(root))
		}},
		{"root replaced by a symlink to a private copy", false, func(t *testing.T, root string) {
			copyDir := root + "-copy"
			require.NoError(t, os.Rename(root, copyDir))
			require.NoError(t, os.Symlink(copyDir, root))
		}},
		{"marker mode 0644", false, func(t *testing.T, root string) {
			require.NoError(t, os.Chmod(filepath.Join(root, markerName), 0o644))
		}},
		{"marker removed", false, func(t *testing.T, root string) {
			require.NoError(t, os.Remove(filepath.Join(root, markerName)))
		}},
		{"marker replaced by a symlink to an identical file", false, func(t *testing.T, root string) {
			m := filepath.Join(root, markerName)
			require.NoError(t, os.Rename(m, m+".real"))
			require.NoError(t, os.Symlink(m+".real", m))
		}},
		{"marker rewritten by another owner process", false, func(t *testing.T, root string) {
			writePrivate(t, filepath.Join(root, markerName), markerFor(1))
		}},
		{"root owned by another uid", true, func(t *testing.T, root string) {
			require.NoError(t, os.Lchown(root, nobody, nobody))
		}},
		{"marker owned by another uid", true, func(t *testing.T, root string) {
			require.NoError(t, os.Lchown(filepath.Join(root, markerName), nobody, nobody))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.chown {
				requireChown(t)
			}
			r := openTestRoot(t, t.TempDir())
			c.spoil(t, r.Path())

			assert.ErrorIs(t, r.Validate(), ErrUnsafe)
			_, err := r.NewSpill()
			assert.ErrorIs(t, err, ErrUnsafe, "nothing is staged in a root that fails validation")
		})
	}
}

func TestNewSpillIsAPrivateFileDirectlyInTheRoot(t *testing.T) {
	r := openTestRoot(t, t.TempDir())

	f, err := r.NewSpill()
	require.NoError(t, err)
	_, err = f.WriteString("full output")
	require.NoError(t, err)
	require.NoError(t, f.Close())

	assert.Equal(t, r.Path(), filepath.Dir(f.Name()))
	assert.Regexp(t, `^spill-[A-Za-z0-9]{10}$`, filepath.Base(f.Name()))
	assert.Equal(t, fs.FileMode(0o600), perm(t, f.Name()))
	assert.NoError(t, validateFile(f.Name()))
}

func TestNewSpillStaysLiveUntilReleased(t *testing.T) {
	r := openTestRoot(t, t.TempDir())
	f, err := r.NewSpill()
	require.NoError(t, err)
	require.NoError(t, f.Close())
	setAge(t, f.Name(), 48*time.Hour)
	now := time.Now()

	rep := r.ReapSpills(now)
	assert.Equal(t, 0, rep.Removed)
	assert.FileExists(t, f.Name(), "an active capture's spill is never reaped")

	r.Release(f.Name())
	rep = r.ReapSpills(now.Add(spillTTL))
	assert.Equal(t, 1, rep.Removed)
	assert.NoFileExists(t, f.Name())
}

func TestCloseRemovesARootThatHoldsOnlyItsMarker(t *testing.T) {
	tmp := t.TempDir()
	r := openTestRoot(t, tmp)

	require.NoError(t, r.Close())

	assert.Empty(t, names(t, tmp))
	assert.NoError(t, r.Close(), "Close is idempotent")
	_, err := r.NewSpill()
	assert.ErrorIs(t, err, ErrClosed)
}

func TestCloseKeepsARootThatStillHoldsSpills(t *testing.T) {
	tmp := t.TempDir()
	r := openTestRoot(t, tmp)
	f, err := r.NewSpill()
	require.NoError(t, err)
	require.NoError(t, f.Close())

	require.NoError(t, r.Close())

	assert.FileExists(t, f.Name(), "a spill path handed out stays readable")
	assert.ElementsMatch(t, []string{markerName, filepath.Base(f.Name())}, names(t, r.Path()))
	assert.NoError(t, r.Validate(), "the marker stays so a later boot can find the root")
}

func TestCloseLeavesARootThatIsNoLongerOurs(t *testing.T) {
	r := openTestRoot(t, t.TempDir())
	require.NoError(t, os.Chmod(r.Path(), 0o755))

	assert.ErrorIs(t, r.Close(), ErrUnsafe)
	assert.DirExists(t, r.Path())
	assert.FileExists(t, filepath.Join(r.Path(), markerName))
}

func TestRootIsSafeForConcurrentUse(t *testing.T) {
	r := openTestRoot(t, t.TempDir())
	for i := range 50 {
		plantSpill(t, r.Path(), fmt.Sprintf("spill-old%07d", i), 48*time.Hour)
	}
	now := time.Now()
	var wg sync.WaitGroup
	spills := make(chan string, 80)
	for range 8 {
		wg.Go(func() {
			for range 10 {
				f, err := r.NewSpill()
				if !assert.NoError(t, err) {
					return
				}
				assert.NoError(t, f.Close())
				at := time.Now().Add(-48 * time.Hour) // old, but live: must survive
				assert.NoError(t, os.Chtimes(f.Name(), at, at))
				spills <- f.Name()
			}
		})
	}
	for i := range 4 {
		wg.Go(func() { r.ReapSpills(now.Add(time.Duration(i) * spillTTL)) })
	}
	wg.Wait()
	close(spills)

	for p := range spills {
		assert.FileExists(t, p, "a live spill survives every concurrent window")
		r.Release(p)
	}
}

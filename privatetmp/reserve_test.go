package privatetmp

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReservationsHaveExactModesWhateverTheUmask(t *testing.T) {
	for _, mask := range []int{0o022, 0o077, 0o000} {
		t.Run(fs.FileMode(mask).String(), func(t *testing.T) {
			parent := t.TempDir()
			withUmask(t, mask)

			dir, err := ReserveDir(parent, "exec-code")
			require.NoError(t, err)
			assert.Equal(t, fs.FileMode(0o700), perm(t, dir))
			assert.Equal(t, parent, filepath.Dir(dir))
			assert.Regexp(t, `^exec-code-[A-Za-z0-9]{10}$`, filepath.Base(dir))

			f, err := ReserveFile(parent, SpillPrefix)
			require.NoError(t, err)
			require.NoError(t, f.Close())
			assert.Equal(t, fs.FileMode(0o600), perm(t, f.Name()))
			assert.Regexp(t, `^spill-[A-Za-z0-9]{10}$`, filepath.Base(f.Name()))

			require.NoError(t, WriteFile(dir, "script.py", []byte("print(1)\n")))
			assert.Equal(t, fs.FileMode(0o600), perm(t, filepath.Join(dir, "script.py")))
		})
	}
}

func TestReservationFailsClosedWhenUmaskStripsOwnerBits(t *testing.T) {
	t.Run("directory", func(t *testing.T) {
		parent := t.TempDir()
		withUmask(t, 0o177) // 0700 comes out 0600

		_, err := ReserveDir(parent, "exec-code")
		assert.ErrorIs(t, err, ErrUnsafe)
		assert.Empty(t, names(t, parent), "a rejected reservation is removed")
	})
	t.Run("file", func(t *testing.T) {
		parent := t.TempDir()
		withUmask(t, 0o277) // 0600 comes out 0400

		_, err := ReserveFile(parent, SpillPrefix)
		assert.ErrorIs(t, err, ErrUnsafe)
		assert.Empty(t, names(t, parent))
	})
	t.Run("published file", func(t *testing.T) {
		parent := t.TempDir()
		withUmask(t, 0o277)

		err := WriteFile(parent, "script.py", []byte("x"))
		assert.ErrorIs(t, err, ErrUnsafe)
		assert.Empty(t, names(t, parent))
	})
}

func TestReservationNeverReusesOrFollowsAPlantedName(t *testing.T) {
	plants := map[string]func(t *testing.T, path, outside string){
		"symlink to a directory": func(t *testing.T, path, outside string) {
			require.NoError(t, os.Symlink(outside, path))
		},
		"symlink to a file": func(t *testing.T, path, outside string) {
			require.NoError(t, os.Symlink(filepath.Join(outside, "target"), path))
		},
		"dangling symlink": func(t *testing.T, path, outside string) {
			require.NoError(t, os.Symlink(filepath.Join(outside, "missing"), path))
		},
		"directory": func(t *testing.T, path, _ string) {
			require.NoError(t, os.Mkdir(path, 0o700))
		},
		"file": func(t *testing.T, path, _ string) {
			writePrivate(t, path, "planted")
		},
	}
	for name, plant := range plants {
		for _, kind := range []string{"dir", "file"} {
			t.Run(name+"/"+kind, func(t *testing.T) {
				parent, outside := t.TempDir(), t.TempDir()
				writePrivate(t, filepath.Join(outside, "target"), "target")
				planted := filepath.Join(parent, "obj-AAAAAAAAAA")
				plant(t, planted, outside)
				before, outsideBefore := snapshot(t, parent), snapshot(t, outside)
				withSuffixes(t, "AAAAAAAAAA", "BBBBBBBBBB")

				var got string
				if kind == "dir" {
					p, err := ReserveDir(parent, "obj")
					require.NoError(t, err)
					got = p
				} else {
					f, err := ReserveFile(parent, "obj")
					require.NoError(t, err)
					require.NoError(t, f.Close())
					got = f.Name()
				}

				assert.Equal(t, filepath.Join(parent, "obj-BBBBBBBBBB"), got, "the planted name is skipped")
				after := snapshot(t, parent)
				delete(after, "obj-BBBBBBBBBB")
				assert.Equal(t, before, after, "the planted object is untouched")
				assert.Equal(t, outsideBefore, snapshot(t, outside), "nothing behind a link is touched")
			})
		}
	}
}

func TestReservationGivesUpWhenEveryNameIsTaken(t *testing.T) {
	parent := t.TempDir()
	writePrivate(t, filepath.Join(parent, "obj-AAAAAAAAAA"), "planted")
	withSuffixes(t, "AAAAAAAAAA")

	_, err := ReserveFile(parent, "obj")
	assert.Error(t, err)
	_, err = ReserveDir(parent, "obj")
	assert.Error(t, err)
	assert.Equal(t, []string{"obj-AAAAAAAAAA"}, names(t, parent))
}

func TestWriteFileReplacesAPlantedSymlinkWithoutTouchingItsTarget(t *testing.T) {
	parent, outside := t.TempDir(), t.TempDir()
	target := filepath.Join(outside, "secret")
	writePrivate(t, target, "keep me")
	require.NoError(t, os.Symlink(target, filepath.Join(parent, "script.py")))

	require.NoError(t, WriteFile(parent, "script.py", []byte("print('hi')\n")))

	fi, err := os.Lstat(filepath.Join(parent, "script.py"))
	require.NoError(t, err)
	assert.True(t, fi.Mode().IsRegular(), "the link was replaced by a file")
	assert.Equal(t, fs.FileMode(0o600), fi.Mode().Perm())
	got, err := os.ReadFile(filepath.Join(parent, "script.py"))
	require.NoError(t, err)
	assert.Equal(t, "print('hi')\n", string(got))
	kept, err := os.ReadFile(target)
	require.NoError(t, err)
	assert.Equal(t, "keep me", string(kept))
	assert.Equal(t, []string{"script.py"}, names(t, parent), "no reservation left behind")
}

func TestWriteFileRefusesADirectoryAtTheFinalNameAndLeavesNoReservation(t *testing.T) {
	parent := t.TempDir()
	blocker := filepath.Join(parent, "res-7.json")
	require.NoError(t, os.Mkdir(blocker, 0o700))
	writePrivate(t, filepath.Join(blocker, "inside"), "x")

	err := WriteFile(parent, "res-7.json", []byte(`{"ok":true}`))

	assert.Error(t, err)
	assert.Equal(t, []string{"res-7.json"}, names(t, parent))
	assert.Equal(t, []string{"inside"}, names(t, blocker))
}

func TestWriteFileReservesAHiddenNameDerivedFromTheFinalName(t *testing.T) {
	cases := map[string]string{
		"script.py":    ".script--AAAAAAAAAA",
		"res-42.json":  ".res-42--AAAAAAAAAA",
		markerName:     "..execute-code-owner--AAAAAAAAAA",
		"no-extension": ".no-extension--AAAAAAAAAA",
	}
	for final, hidden := range cases {
		t.Run(final, func(t *testing.T) {
			parent := t.TempDir()
			// A plant at the first hidden name forces a retry, which
			// proves the name the reservation tried.
			writePrivate(t, filepath.Join(parent, hidden), "planted")
			withSuffixes(t, "AAAAAAAAAA", "BBBBBBBBBB")

			require.NoError(t, WriteFile(parent, final, []byte("data")))

			assert.ElementsMatch(t, []string{hidden, final}, names(t, parent))
			planted, err := os.ReadFile(filepath.Join(parent, hidden))
			require.NoError(t, err)
			assert.Equal(t, "planted", string(planted))
		})
	}
}

func TestWriteFileRejectsNamesThatAreNotPlain(t *testing.T) {
	parent := t.TempDir()
	for _, name := range []string{"", ".", "..", "../escape", "sub/file", "/abs"} {
		err := WriteFile(parent, name, []byte("x"))
		assert.ErrorIs(t, err, fs.ErrInvalid, "name %q", name)
	}
	assert.Empty(t, names(t, parent))
	assert.NoFileExists(t, filepath.Join(filepath.Dir(parent), "escape"))
}

func TestValidationFailsClosed(t *testing.T) {
	type setup func(t *testing.T, dir string) string
	cases := []struct {
		name    string
		wantDir bool
		root    bool // needs chown
		make    setup
	}{
		{"directory with mode 0755", true, false, func(t *testing.T, d string) string {
			p := filepath.Join(d, "x")
			require.NoError(t, os.Mkdir(p, 0o700))
			require.NoError(t, os.Chmod(p, 0o755))
			return p
		}},
		{"directory with mode 0500", true, false, func(t *testing.T, d string) string {
			p := filepath.Join(d, "x")
			require.NoError(t, os.Mkdir(p, 0o700))
			require.NoError(t, os.Chmod(p, 0o500))
			return p
		}},
		{"file with mode 0644", false, false, func(t *testing.T, d string) string {
			p := filepath.Join(d, "x")
			writePrivate(t, p, "x")
			require.NoError(t, os.Chmod(p, 0o644))
			return p
		}},
		{"file where a directory is wanted", true, false, func(t *testing.T, d string) string {
			p := filepath.Join(d, "x")
			writePrivate(t, p, "x")
			return p
		}},
		{"directory where a file is wanted", false, false, func(t *testing.T, d string) string {
			p := filepath.Join(d, "x")
			require.NoError(t, os.Mkdir(p, 0o700))
			return p
		}},
		{"symlink to a private directory", true, false, func(t *testing.T, d string) string {
			real := filepath.Join(d, "real")
			require.NoError(t, os.Mkdir(real, 0o700))
			p := filepath.Join(d, "x")
			require.NoError(t, os.Symlink(real, p))
			return p
		}},
		{"symlink to a private file", false, false, func(t *testing.T, d string) string {
			real := filepath.Join(d, "real")
			writePrivate(t, real, "x")
			p := filepath.Join(d, "x")
			require.NoError(t, os.Symlink(real, p))
			return p
		}},
		{"directory owned by another uid", true, true, func(t *testing.T, d string) string {
			p := filepath.Join(d, "x")
			require.NoError(t, os.Mkdir(p, 0o700))
			require.NoError(t, os.Lchown(p, nobody, nobody))
			return p
		}},
		{"file owned by another uid", false, true, func(t *testing.T, d string) string {
			p := filepath.Join(d, "x")
			writePrivate(t, p, "x")
			require.NoError(t, os.Lchown(p, nobody, nobody))
			return p
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.root {
				requireChown(t)
			}
			p := c.make(t, t.TempDir())
			var err error
			if c.wantDir {
				err = validateDir(p)
			} else {
				err = validateFile(p)
			}
			assert.ErrorIs(t, err, ErrUnsafe)
			assert.NotContains(t, err.Error(), filepath.Dir(p), "errors name the object, not its path")
		})
	}
	t.Run("missing object", func(t *testing.T) {
		err := validateDir(filepath.Join(t.TempDir(), "gone"))
		assert.ErrorIs(t, err, fs.ErrNotExist)
	})
	t.Run("a private object of ours passes", func(t *testing.T) {
		d := t.TempDir()
		require.NoError(t, os.Chmod(d, 0o700))
		assert.NoError(t, validateDir(d))
		writePrivate(t, filepath.Join(d, "f"), "x")
		assert.NoError(t, validateFile(filepath.Join(d, "f")))
	})
}

func TestSuffixesUseOnlyTheAlphabet(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		s := newSuffix()
		require.Len(t, s, suffixLen)
		assert.Empty(t, strings.Trim(s, alphabet), "suffix %q", s)
		assert.False(t, seen[s], "suffix repeated")
		seen[s] = true
	}
}

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The host's peak memory while a script plants what costs the tools the
// most: it stays within 64 MiB of a trivial run's, measured on the real
// (uninstrumented) binary.

// runPeak runs the CLI on script with the tool root root and returns its
// JSON result and the host's own peak RSS (VmHWM, KiB), polled while it
// lives: the rusage of a child forked from this (large) test process
// would count this process's memory as the child's.
func runPeak(t *testing.T, root, script string, args ...string) (res toolResult, peakKiB int64) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"run", "--json", "--root", root}, append(args, "-")...)...)
	cmd.Stdin = strings.NewReader(script)
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	require.NoError(t, cmd.Start())
	peakKiB, err := waitPeakRSS(cmd)
	require.NoError(t, err, "stdout %s\nstderr %s", out.String(), errb.String())
	require.NoError(t, json.Unmarshal(out.Bytes(), &res), out.String())
	return res, peakKiB
}

type toolResult struct {
	Blocks  []string
	Details map[string]any
}

// plantBudgetFillers fills every per-walk budget at once: two ignore
// files on one walk's path, together just inside the pattern budget
// (long anchored patterns, whose first segment already fails, so that
// matching every entry against all of them stays quick), another of the costliest shape (a megabyte of three-byte lines:
// ~33 MiB of parsed patterns if it were parsed), a directory whose
// listing fills the listing budget below them, and a tree as deep as a
// walk enters.
func plantBudgetFillers(t *testing.T, root string) {
	t.Helper()
	big := filepath.Join(root, "big")
	require.NoError(t, os.Mkdir(big, 0o755))
	long := "zz/" + strings.Repeat("n", 1000)
	for dir, size := range map[string]int{root: 950 << 10, big: 750 << 10} {
		var b strings.Builder
		for i := 0; b.Len() < size; i++ {
			fmt.Fprintf(&b, "%s%d/\n", long, i)
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, ".gitignore"), []byte(b.String()), 0o644))
	}
	require.NoError(t, os.MkdirAll(filepath.Join(root, "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "sub", ".gitignore"), bytes.Repeat([]byte("ab\n"), (1<<20)/3), 0o644))
	pad := strings.Repeat("x", 250)
	for i := range 8200 {
		require.NoError(t, os.WriteFile(filepath.Join(big, fmt.Sprintf("%05d%s", i, pad)), nil, 0o644))
	}
	deep := filepath.Join(root, strings.Repeat("d/", 260))
	require.NoError(t, os.MkdirAll(deep, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(deep, "x.txt"), []byte("needle\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "a.txt"), []byte("needle\n"), 0o644))
}

func TestPlantedContentKeepsTheHostsPeakMemoryBounded(t *testing.T) {
	root := t.TempDir()
	_, baseline := runPeak(t, root, "text('ok')")

	// The reproduction: a million-line .gitignore, then grep.
	million := `
with open(".gitignore", "w") as f:
    for i in range(10**6):
        f.write(f"dir{i}/file{i}.txt\n")
with open("a.txt", "w") as f:
    f.write("needle\n")
text(grep("needle", glob="*.txt"))
text(read("a.txt"))
`
	res, peak := runPeak(t, t.TempDir(), million, "--timeout-ms", "120000")
	require.Len(t, res.Blocks, 2, res.Blocks)
	assert.Regexp(t, `^a\.txt:1:needle\n\[\.gitignore skipped: \d+ bytes, over the 1 MiB limit for ignore files\]$`, res.Blocks[0])
	assert.Equal(t, "     1\tneedle", res.Blocks[1])
	assert.Less(t, peak-baseline, int64(64<<10), "host peak RSS %d KiB, trivial run %d KiB", peak, baseline)
	t.Logf("million-line .gitignore: host peak RSS %d KiB, trivial run %d KiB (+%d KiB)", peak, baseline, peak-baseline)

	// Every budget full, in max_parallel_rpc walks at once, twice over.
	filled := t.TempDir()
	plantBudgetFillers(t, filled)
	parallel := `
calls = [("grep", {"pattern": "needle"}), ("find", {"pattern": "*", "max_results": 100000}),
         ("ls", {"recursive": True, "max_entries": 100000}), ("grep", {"pattern": "x", "context_lines": 100000})]
for r in batch(calls + calls):
    text("\n".join(l for l in r.splitlines() if l.startswith("["))[:400])
`
	res, peak = runPeak(t, filled, parallel, "--timeout-ms", "120000")
	require.Len(t, res.Blocks, 8, res.Blocks)
	assert.Less(t, peak-baseline, int64(64<<10), "host peak RSS %d KiB, trivial run %d KiB", peak, baseline)
	t.Logf("every budget full, 8 calls 4 at a time: host peak RSS %d KiB, trivial run %d KiB (+%d KiB); last lines %q",
		peak, baseline, peak-baseline, res.Blocks)
}

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/config"
)

// symlinkSwapper swaps links between a target inside the tool root and one
// outside it, as fast as it can, while the script calls helpers through
// them: a tool that checks a path and then opens it would be raced out of
// the root.
const symlinkSwapper = `
import os, threading
os.makedirs("d", exist_ok=True)
with open("inside.txt", "w") as f: f.write("inside")
with open("d/f.txt", "w") as f: f.write("inside")
OUT_FILE, OUT_DIR = %q, %q
stop = []
def flip(name, targets):
    i = 0
    while not stop:
        i += 1
        tmp = name + ".swap"
        try: os.remove(tmp)
        except FileNotFoundError: pass
        os.symlink(targets[i %% 2], tmp)
        os.replace(tmp, name)
threads = [threading.Thread(target=flip, args=("l", ("inside.txt", OUT_FILE))),
           threading.Thread(target=flip, args=("dl", ("d", OUT_DIR)))]
for t in threads: t.start()
seen = []
try:
    for _ in range(40):
        for call in (lambda: read(path="l"), lambda: read(path="dl/f.txt"),
                     lambda: grep("SECRET", path="dl"), lambda: find("*.txt", path="dl"),
                     lambda: ls(path="dl")):
            try: seen.append(str(call()))
            except ToolError as e: seen.append("error: " + str(e))
finally:
    stop.append(1)
    for t in threads: t.join()
text("\n".join(seen))
`

func TestSymlinksSwappedDuringHelperCallsNeverEscapeTheRoot(t *testing.T) {
	outside := t.TempDir()
	secret := "SECRET-" + randomMark()
	outFile := filepath.Join(outside, "f.txt")
	require.NoError(t, os.WriteFile(outFile, []byte(secret), 0o644))
	script := fmt.Sprintf(symlinkSwapper, outFile, outside)
	calls := withConfig(func(c *config.Config) { c.MaxRPCCalls = 200 })
	for _, mode := range []string{"per_call", "session"} {
		t.Run(mode, func(t *testing.T) {
			var res executecode.Result
			if mode == "session" {
				e := sessionEnv(t, nil, calls)
				res = e.cell(e.attach("s1"), script, 60000)
			} else {
				e := newEnv(t, nil, calls)
				res = e.run(script, 60000)
			}
			require.Len(t, res.Blocks, 1, res.Text())
			assert.NotContains(t, res.Text(), secret, "nothing outside the root was read")
			assert.NotContains(t, res.Text(), outside, "no host path outside the root is shown")
			assert.Contains(t, res.Blocks[0], "inside", "the helpers did run through the links")
			assert.EqualValues(t, 200, res.Details.RPCCalls)
		})
	}
}

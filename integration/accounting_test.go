package integration

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/tools"
)

// plantForgedClaim writes what a hostile script would to buy accounting
// for a call that never ran: a claim marker naming a tool outside the
// allowlist, next to a forged success for it. The next helper call's
// sweep finds both.
const plantForgedClaim = `
import json, os, exec_tools
D = exec_tools._BRIDGE.dir
def put(name, body):
    with open(os.path.join(D, name + ".x"), "w") as f:
        f.write(json.dumps(body))
    os.replace(os.path.join(D, name + ".x"), os.path.join(D, name))
put("req-90.claim", {"id": 90, "tool": "bash-rm-rf", "params": {}})
put("res-90.json", {"id": 90, "ok": True, "content": "x" * 1000})
text(read(path="a.txt"))
`

func TestAPlantedClaimMarkerBuysNoAccountingInEitherMode(t *testing.T) {
	for _, mode := range []string{"per_call", "session"} {
		t.Run(mode, func(t *testing.T) {
			ct := &countingTool{name: "read"}
			opts := []envOption{withTools(map[string]tools.Tool{"read": ct})}
			var res executecode.Result
			if mode == "session" {
				e := sessionEnv(t, map[string]string{"a.txt": "a"}, opts...)
				res = e.cell(e.attach("s1"), plantForgedClaim)
			} else {
				e := newEnv(t, map[string]string{"a.txt": "a"}, opts...)
				res = e.run(plantForgedClaim)
			}
			require.Equal(t, []string{"counted"}, res.Blocks, res.Text())
			d := res.Details
			assert.Equal(t, []string{"read"}, d.RPCTools, "only the tool that really ran")
			assert.Equal(t, 1, d.RPCCalls)
			assert.EqualValues(t, len("counted"), d.RPCBytes, "the forged response's bytes are not charged")
			assert.Equal(t, 1, d.RPCErrors, "the planted marker is counted as an error")
			assert.EqualValues(t, 1, ct.calls.Load())
		})
	}
}

package integration

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/config"
)

func TestSessionMemoryLimitHeadlineNamesTheLimit(t *testing.T) {
	e := sessionEnv(t, nil, withConfig(func(c *config.Config) { c.MemoryLimitMB = 256 }))
	o := e.attach("s1")
	res := e.cell(o, "text('allocating')\nx = bytearray(1 << 30)\n", 20000)
	assert.Equal(t, executecode.KilledByMemoryLimit, res.Details.KilledBy)
	assert.True(t, strings.HasPrefix(res.Text(), "Script killed: memory limit (256 MB) exceeded."), res.Text())
}

package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// aliasValues gives, per kind, two values that load to different
// configurations.
var aliasValues = map[kind][2]string{
	kindBool:        {"false", "true"},
	kindPath:        {"/opt/a/python3", "/opt/b/python3"},
	kindDeclaredInt: {"7", "9"},
	kindBound:       {"7", "9"},
	kindLimit:       {"7", "9"},
	kindTools:       {"read", "grep"},
	kindMode:        {"session", "per_call"},
	kindSandbox:     {"landlock", "bogus"},
	kindPolicy:      {"read", "grep"},
	kindCount:       {"2", "3"},
}

// Every LEMON_EXECUTE_CODE_* variable has an EXECUTE_CODE_* alias that
// loads the same configuration; where both are set, the LEMON_ form wins.
func TestEveryEnvVariableHasAnAliasAndTheLemonFormWins(t *testing.T) {
	for _, k := range keys {
		t.Run(k.name, func(t *testing.T) {
			vals, ok := aliasValues[k.kind]
			require.True(t, ok, "kind of %s has sample values", k.name)
			a, b := vals[0], vals[1]
			lemon := load(t, in{env: []string{EnvName(k.name) + "=" + a}})
			alias := load(t, in{env: []string{AliasName(k.name) + "=" + a}})
			other := load(t, in{env: []string{AliasName(k.name) + "=" + b}})
			require.NoError(t, lemon.err)
			require.NoError(t, alias.err)
			assert.Equal(t, lemon.cfg, alias.cfg, "the alias sets %s like the LEMON_ form", k.name)
			assert.NotEqual(t, lemon.cfg, other.cfg, "the sample values differ in effect")
			assert.NotEqual(t, Defaults(), alias.cfg, "the alias is not ignored")

			for _, env := range [][]string{
				{EnvName(k.name) + "=" + a, AliasName(k.name) + "=" + b},
				{AliasName(k.name) + "=" + b, EnvName(k.name) + "=" + a},
			} {
				both := load(t, in{env: env})
				require.NoError(t, both.err)
				assert.Equal(t, lemon.cfg, both.cfg, "LEMON_ wins over the alias: %v", env)
			}
		})
	}
}

// A warning about an alias's value names the variable that was set.
func TestWarningsNameTheAliasThatWasSet(t *testing.T) {
	l := load(t, in{env: []string{AliasName("timeout_ms") + "=soon"}})
	require.NoError(t, l.err)
	require.Len(t, l.warnings, 1, "%+v", l.warnings)
	assert.Equal(t, "env EXECUTE_CODE_TIMEOUT_MS", l.warnings[0].Source)
}

// The runtime's own EXECUTE_CODE_* variables (a leaked guard or
// handshake) are not configuration and draw no warning.
func TestUnknownAliasVariablesAreIgnoredSilently(t *testing.T) {
	l := load(t, in{env: []string{"EXECUTE_CODE_GUARD=1", "EXECUTE_CODE_HANDSHAKE=3:1"}})
	require.NoError(t, l.err)
	assert.Empty(t, l.warnings)
	assert.Equal(t, Defaults(), l.cfg)
}

package config

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/executecode/executecode/tools"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDefaultsMatchTheSeedAndLimitRulings(t *testing.T) {
	d := Defaults()
	assert.Equal(t, Config{
		Enabled:                 false,
		PythonPath:              "",
		TimeoutMS:               120000,
		MaxRPCCalls:             100,
		MaxRPCResultBytes:       5242880,
		MaxOutputBytes:          50000,
		MaxTextBytes:            65536,
		MaxParallelRPC:          4,
		Tools:                   []string{"read", "grep", "find", "ls", "webfetch"},
		KernelMode:              PerCall,
		KernelIdleTimeoutMS:     1800000,
		MaxLiveKernels:          16,
		MaxQueuedCellsPerKernel: 8,
		CPULimitSeconds:         0,
		MemoryLimitMB:           4096,
		FsizeLimitMB:            1024,
		NprocLimit:              0,
		MaxSpillBytes:           1 << 30,
		Sandbox:                 "none",
		Allow:                   []string{},
		Deny:                    []string{},
		RequireApproval:         []string{},
		ApprovalTimeoutMS:       300000,
		WarmInterpreters:        1,
	}, d)
	d.Tools[0] = "changed"
	assert.Equal(t, "read", tools.Allowlist[0], "Defaults must not alias the allowlist")
}

func TestLoadWithNoSourcesGivesDefaultsSilently(t *testing.T) {
	r := load(t, in{})
	require.NoError(t, r.err)
	assert.Equal(t, Defaults(), r.cfg)
	assert.Empty(t, r.warnings)
}

func TestLoadIgnoresOtherTables(t *testing.T) {
	r := load(t, in{toml: "[runtime.other]\ntimeout_ms = [1]\n[runtime.tools.bash]\nenabled = true\n"})
	require.NoError(t, r.err)
	assert.Equal(t, Defaults(), r.cfg)
	assert.Empty(t, r.warnings)
}

func TestLoadWarnsAboutTheLegacyToolsTable(t *testing.T) {
	r := load(t, in{toml: "[tools.execute_code]\nenabled = true\n"})
	require.NoError(t, r.err)
	assert.False(t, r.cfg.Enabled)
	require.Len(t, r.warnings, 1)
	assert.Contains(t, r.warnings[0].Message, "[runtime.tools.execute_code]")
}

func TestLoadReadsEnvironmentWhenEnvIsNil(t *testing.T) {
	t.Setenv("LEMON_EXECUTE_CODE_TIMEOUT_MS", "777")
	r := loadOpts(t, Options{Cwd: t.TempDir()})
	require.NoError(t, r.err)
	assert.Equal(t, 777, r.cfg.TimeoutMS)
}

func TestEnabledAcceptsOnlyBooleanSpellings(t *testing.T) {
	cases := []struct {
		name     string
		toml     string
		env      string
		want     bool
		explicit bool
		warns    int
	}{
		{name: "toml true", toml: "enabled = true", want: true, explicit: true},
		{name: "toml false", toml: "enabled = false", want: false, explicit: true},
		{name: "toml string true", toml: `enabled = "true"`, want: true, explicit: true},
		{name: "toml string 1", toml: `enabled = "1"`, want: true, explicit: true},
		{name: "toml integer 1", toml: "enabled = 1", want: true, explicit: true},
		{name: "toml integer 0", toml: "enabled = 0", want: false, explicit: true},
		{name: "toml string 0", toml: `enabled = "0"`, want: false, explicit: true},
		{name: "toml string false", toml: `enabled = "false"`, want: false, explicit: true},
		{name: "toml yes is not a boolean", toml: `enabled = "yes"`, want: false, warns: 1},
		{name: "toml TRUE is not a boolean", toml: `enabled = "TRUE"`, want: false, warns: 1},
		{name: "toml integer 2 is not a boolean", toml: "enabled = 2", want: false, warns: 1},
		{name: "env true", env: "true", want: true, explicit: true},
		{name: "env 1", env: "1", want: true, explicit: true},
		{name: "env 0", env: "0", want: false, explicit: true},
		{name: "env false beats toml true", toml: "enabled = true", env: "false", want: false, explicit: true},
		{name: "malformed env falls back to toml", toml: "enabled = true", env: "on", want: true, explicit: true, warns: 1},
		{name: "malformed env and no toml is the default", env: "on", want: false, warns: 1},
		{name: "empty env is unset", toml: "enabled = true", env: "", want: true, explicit: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			i := in{}
			if tc.toml != "" {
				i.toml = table(tc.toml)
			}
			if tc.env != "" || strings.Contains(tc.name, "empty env") {
				i.env = []string{"LEMON_EXECUTE_CODE_ENABLED=" + tc.env}
			}
			r := load(t, i)
			require.NoError(t, r.err)
			assert.Equal(t, tc.want, r.cfg.Enabled)
			assert.Equal(t, tc.explicit, r.cfg.EnabledExplicit)
			assertWarnings(t, r.warnings, "enabled", tc.warns, strconv.FormatBool(tc.want))
		})
	}
}

func TestEnabledOverrideIsExplicit(t *testing.T) {
	r := load(t, in{toml: table("enabled = false"), over: map[string]any{"enabled": true}})
	require.NoError(t, r.err)
	assert.True(t, r.cfg.Enabled)
	assert.True(t, r.cfg.EnabledExplicit)
}

func TestDeclaredIntegerKeysClampUpToOneAndDefaultWhenMalformed(t *testing.T) {
	declared := map[string]int64{
		"timeout_ms":           120000,
		"max_rpc_calls":        100,
		"max_rpc_result_bytes": 5242880,
		"max_output_bytes":     50000,
	}
	cases := []struct {
		name  string
		toml  string // the value as written in TOML; "" = absent
		env   string // "" = unset
		want  int64  // -1 = the key's default
		warns int
	}{
		{name: "toml integer", toml: "500", want: 500},
		{name: "toml numeric string", toml: `"500"`, want: 500},
		{name: "toml numeric string is trimmed", toml: `" 500 "`, want: 500},
		{name: "toml signed string", toml: `"+7"`, want: 7},
		{name: "toml zero clamps to 1", toml: "0", want: 1, warns: 1},
		{name: "toml negative clamps to 1", toml: "-5", want: 1, warns: 1},
		{name: "toml negative string clamps to 1", toml: `"-5"`, want: 1, warns: 1},
		{name: "toml garbage string is the default", toml: `"abc"`, want: -1, warns: 1},
		{name: "toml partly numeric string is the default", toml: `"5x"`, want: -1, warns: 1},
		{name: "toml underscore string is the default", toml: `"1_000"`, want: -1, warns: 1},
		{name: "toml huge string saturates", toml: `"99999999999999999999"`, want: math.MaxInt64, warns: 1},
		{name: "env integer", env: "42", want: 42},
		{name: "env beats toml", toml: "500", env: "42", want: 42},
		{name: "env zero clamps to 1", toml: "500", env: "0", want: 1, warns: 1},
		{name: "malformed env falls back to toml", toml: "500", env: "4 2", want: 500, warns: 1},
		{name: "malformed env and toml give the default", toml: `"x"`, env: "y", want: -1, warns: 2},
	}
	for key, def := range declared {
		for _, tc := range cases {
			t.Run(key+"/"+tc.name, func(t *testing.T) {
				r := load(t, intInput(key, tc.toml, tc.env))
				require.NoError(t, r.err)
				want := tc.want
				if want == -1 {
					want = def
				}
				assert.Equal(t, want, intField(&r.cfg, key).get())
				assertWarnings(t, r.warnings, key, tc.warns, showInt(want))
			})
		}
	}
}

func TestBoundKeysTakeTheFirstPositiveIntegerOfEnvTOMLDefault(t *testing.T) {
	bound := map[string]int64{
		"max_text_bytes":              65536,
		"max_parallel_rpc":            4,
		"kernel_idle_timeout_ms":      1800000,
		"max_live_kernels":            16,
		"max_queued_cells_per_kernel": 8,
		"approval_timeout_ms":         300000,
	}
	cases := []struct {
		name  string
		toml  string
		env   string
		want  int64 // -1 = default
		warns int
	}{
		{name: "toml positive", toml: "3", want: 3},
		{name: "toml numeric string", toml: `"3"`, want: 3},
		{name: "toml zero is the default", toml: "0", want: -1, warns: 1},
		{name: "toml negative is the default", toml: "-3", want: -1, warns: 1},
		{name: "toml garbage is the default", toml: `"many"`, want: -1, warns: 1},
		{name: "env positive beats toml", toml: "3", env: "9", want: 9},
		{name: "env zero falls back to toml", toml: "3", env: "0", want: 3, warns: 1},
		{name: "env negative falls back to toml", toml: "3", env: "-9", want: 3, warns: 1},
		{name: "env garbage falls back to toml", toml: "3", env: "nine", want: 3, warns: 1},
		{name: "both invalid give the default", toml: "0", env: "nine", want: -1, warns: 2},
		{name: "env alone", env: "12", want: 12},
	}
	for key, def := range bound {
		for _, tc := range cases {
			t.Run(key+"/"+tc.name, func(t *testing.T) {
				r := load(t, intInput(key, tc.toml, tc.env))
				require.NoError(t, r.err)
				want := tc.want
				if want == -1 {
					want = def
				}
				assert.Equal(t, want, intField(&r.cfg, key).get())
				assertWarnings(t, r.warnings, key, tc.warns, showInt(want))
			})
		}
	}
}

func TestLimitKeysTreatZeroAsNoLimitAndNegativeAsDefault(t *testing.T) {
	limits := map[string]int64{
		"cpu_limit_seconds": 0,
		"memory_limit_mb":   4096,
		"fsize_limit_mb":    1024,
		"nproc_limit":       0,
		"max_spill_bytes":   1 << 30,
	}
	cases := []struct {
		name  string
		toml  string
		env   string
		want  int64 // -1 = default
		warns int
	}{
		{name: "toml zero is no limit", toml: "0", want: 0},
		{name: "toml positive", toml: "30", want: 30},
		{name: "toml numeric string", toml: `"30"`, want: 30},
		{name: "toml negative is the default", toml: "-1", want: -1, warns: 1},
		{name: "toml garbage is the default", toml: `"lots"`, want: -1, warns: 1},
		{name: "env beats toml", toml: "30", env: "50", want: 50},
		{name: "env zero is no limit", toml: "30", env: "0", want: 0},
		{name: "env negative falls back to toml", toml: "30", env: "-1", want: 30, warns: 1},
		{name: "env garbage falls back to toml", toml: "30", env: "x", want: 30, warns: 1},
	}
	for key, def := range limits {
		for _, tc := range cases {
			t.Run(key+"/"+tc.name, func(t *testing.T) {
				r := load(t, intInput(key, tc.toml, tc.env))
				require.NoError(t, r.err)
				want := tc.want
				if want == -1 {
					want = def
				}
				assert.Equal(t, want, intField(&r.cfg, key).get())
				assertWarnings(t, r.warnings, key, tc.warns, showInt(want))
			})
		}
	}
}

// warm_interpreters keeps 0 (none warm) up to MaxWarmInterpreters; more
// is clamped with a warning, and a negative or malformed value falls
// through to the next source, as for the limits.
func TestWarmInterpretersAreZeroToTheMaximumClamped(t *testing.T) {
	cases := []struct {
		name  string
		toml  string
		env   string
		alias string
		want  int64
		warns int
	}{
		{name: "default", want: 1},
		{name: "toml zero disables", toml: "0", want: 0},
		{name: "toml some", toml: "3", want: 3},
		{name: "toml numeric string", toml: `"2"`, want: 2},
		{name: "toml above the maximum is clamped", toml: "100", want: MaxWarmInterpreters, warns: 1},
		{name: "toml huge is clamped", toml: `"99999999999999999999999"`, want: MaxWarmInterpreters, warns: 1},
		{name: "toml negative is the default", toml: "-1", want: 1, warns: 1},
		{name: "toml garbage is the default", toml: `"lots"`, want: 1, warns: 1},
		{name: "env beats toml", toml: "3", env: "0", want: 0},
		{name: "env negative falls back to toml", toml: "3", env: "-2", want: 3, warns: 1},
		{name: "env above the maximum is clamped", env: "9", want: MaxWarmInterpreters, warns: 1},
		{name: "alias", alias: "4", want: 4},
		{name: "env beats the alias", env: "2", alias: "4", want: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			i := intInput("warm_interpreters", tc.toml, tc.env)
			if tc.alias != "" {
				i.env = append(i.env, AliasName("warm_interpreters")+"="+tc.alias)
			}
			r := load(t, i)
			require.NoError(t, r.err)
			assert.Equal(t, int(tc.want), r.cfg.WarmInterpreters)
			assertWarnings(t, r.warnings, "warm_interpreters", tc.warns, showInt(tc.want))
		})
	}
	r := load(t, in{over: map[string]any{"warm_interpreters": 0}})
	require.NoError(t, r.err)
	assert.Zero(t, r.cfg.WarmInterpreters, "a CLI override sets it too")
}

func TestSpillCapIsTheSmallerOfMaxSpillBytesAndTheFileSizeLimit(t *testing.T) {
	cases := []struct {
		name        string
		spill       string
		fsize       string
		want        int64
		wantWarning bool
	}{
		{name: "defaults: both are 1 GiB", want: 1 << 30},
		{name: "a strict file size limit caps the spill", fsize: "10", want: 10 << 20},
		{name: "a smaller max_spill_bytes wins", spill: "4096", fsize: "10", want: 4096},
		{name: "no file size limit: max_spill_bytes alone", fsize: "0", spill: "123", want: 123},
		{name: "max_spill_bytes 0: the file size limit alone", spill: "0", fsize: "10", want: 10 << 20},
		{name: "both 0: no cap", spill: "0", fsize: "0", want: 0},
		{name: "negative is the default, warned", spill: "-5", fsize: "0", want: 1 << 30, wantWarning: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var env []string
			if tc.spill != "" {
				env = append(env, "LEMON_EXECUTE_CODE_MAX_SPILL_BYTES="+tc.spill)
			}
			if tc.fsize != "" {
				env = append(env, "LEMON_EXECUTE_CODE_FSIZE_LIMIT_MB="+tc.fsize)
			}
			r := load(t, in{env: env})
			require.NoError(t, r.err)
			assert.Equal(t, tc.want, r.cfg.SpillLimitBytes())
			if tc.wantWarning {
				assertWarnings(t, r.warnings, "max_spill_bytes", 1, showInt(1<<30))
			}
		})
	}
}

func TestKernelModeSelectsSessionOnlyForTheExactString(t *testing.T) {
	cases := []struct {
		name  string
		toml  string
		env   *string
		over  any
		want  Mode
		warns int
	}{
		{name: "default", want: PerCall},
		{name: "toml session", toml: `"session"`, want: Session},
		{name: "toml per_call", toml: `"per_call"`, want: PerCall},
		{name: "toml capitalised", toml: `"Session"`, want: PerCall, warns: 1},
		{name: "toml untrimmed", toml: `" session"`, want: PerCall, warns: 1},
		{name: "toml typo", toml: `"sesion"`, want: PerCall, warns: 1},
		{name: "env session", env: ptr("session"), want: Session},
		{name: "env per_call beats toml session", toml: `"session"`, env: ptr("per_call"), want: PerCall},
		{name: "malformed env does not fall back to toml", toml: `"session"`, env: ptr("bogus"), want: PerCall, warns: 1},
		{name: "set but empty env does not fall back to toml", toml: `"session"`, env: ptr(""), want: PerCall, warns: 1},
		{name: "override beats env", env: ptr("per_call"), over: "session", want: Session},
		{name: "override per_call beats toml session", toml: `"session"`, over: "per_call", want: PerCall},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			i := in{}
			if tc.toml != "" {
				i.toml = table("kernel_mode = " + tc.toml)
			}
			if tc.env != nil {
				i.env = []string{"LEMON_EXECUTE_CODE_KERNEL_MODE=" + *tc.env}
			}
			if tc.over != nil {
				i.over = map[string]any{"kernel_mode": tc.over}
			}
			r := load(t, i)
			require.NoError(t, r.err)
			assert.Equal(t, tc.want, r.cfg.KernelMode)
			assertWarnings(t, r.warnings, "kernel_mode", tc.warns, string(tc.want))
		})
	}
}

func TestToolsNarrowTheAllowlistKeepingOrderAndDuplicates(t *testing.T) {
	full := tools.Allowlist
	cases := []struct {
		name  string
		toml  string
		env   *string
		over  any
		want  []string
		warns int
	}{
		{name: "absent is the full allowlist", want: full},
		{name: "empty toml list is the full allowlist", toml: "[]", want: full},
		{name: "toml list keeps order and duplicates", toml: `["ls", "read", "ls"]`, want: []string{"ls", "read", "ls"}},
		{name: "toml list is trimmed and empties dropped", toml: `[" grep ", "", "  "]`, want: []string{"grep"}},
		{name: "toml string splits on comma and colon", toml: `"grep:read,grep"`, want: []string{"grep", "read", "grep"}},
		{name: "unknown names are dropped", toml: `["bash", "read", "write"]`, want: []string{"read"}, warns: 1},
		{name: "only unknown names give no helpers", toml: `["bash"]`, want: []string{}, warns: 1},
		{name: "none gives no helpers silently", toml: `["none"]`, want: []string{}},
		{name: "names are case sensitive", toml: `["Read"]`, want: []string{}, warns: 1},
		{name: "env list wins over toml", toml: `["read"]`, env: ptr("ls, webfetch"), want: []string{"ls", "webfetch"}},
		{name: "env splits on colon", env: ptr("find:grep"), want: []string{"find", "grep"}},
		{name: "empty env falls back to toml", toml: `["read"]`, env: ptr(""), want: []string{"read"}},
		{name: "env of only separators falls back to toml", toml: `["read"]`, env: ptr(" , : "), want: []string{"read"}},
		{name: "env of only unknown names gives no helpers", toml: `["read"]`, env: ptr("bash"), want: []string{}, warns: 1},
		{name: "override slice beats env", env: ptr("ls"), over: []string{"grep", "find"}, want: []string{"grep", "find"}},
		{name: "override string", over: "read,ls", want: []string{"read", "ls"}},
		{name: "empty override falls back", toml: `["find"]`, over: []string{}, want: []string{"find"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			i := in{}
			if tc.toml != "" {
				i.toml = table("tools = " + tc.toml)
			}
			if tc.env != nil {
				i.env = []string{"LEMON_EXECUTE_CODE_TOOLS=" + *tc.env}
			}
			if tc.over != nil {
				i.over = map[string]any{"tools": tc.over}
			}
			r := load(t, i)
			require.NoError(t, r.err)
			assert.Equal(t, tc.want, r.cfg.Tools)
			assertWarnings(t, r.warnings, "tools", tc.warns, showTools(tc.want))
		})
	}
}

func TestPythonPathIsMadeAbsoluteWithoutResolvingSymlinks(t *testing.T) {
	home := t.TempDir()
	cwd := t.TempDir()
	linkDir := t.TempDir()
	link := filepath.Join(linkDir, "python3")
	require.NoError(t, os.Symlink("/nonexistent/python3.12", link))

	cases := []struct {
		name  string
		toml  string
		env   *string
		want  string
		warns int
	}{
		{name: "absent is PATH lookup", want: ""},
		{name: "empty is PATH lookup", toml: `""`, want: ""},
		{name: "blank is PATH lookup with a warning", toml: `"   "`, want: "", warns: 1},
		{name: "absolute is cleaned", toml: `"/usr/bin/../bin/./python3"`, want: "/usr/bin/python3"},
		{name: "absolute is trimmed", toml: `" /usr/bin/python3 "`, want: "/usr/bin/python3"},
		{name: "relative resolves against cwd", toml: `"venv/bin/python3"`, want: filepath.Join(cwd, "venv/bin/python3")},
		{name: "dot relative resolves against cwd", toml: `"../py/python3"`, want: filepath.Join(filepath.Dir(cwd), "py/python3")},
		{name: "tilde slash is home", toml: `"~/bin/python3"`, want: filepath.Join(home, "bin/python3")},
		{name: "tilde alone is home", toml: `"~"`, want: home},
		{name: "tilde user is relative", toml: `"~bob/python3"`, want: filepath.Join(cwd, "~bob/python3")},
		{name: "symlink is kept", toml: `"` + link + `"`, want: link},
		{name: "env beats toml", toml: `"/a/python3"`, env: ptr("/b/python3"), want: "/b/python3"},
		{name: "empty env is unset", toml: `"/a/python3"`, env: ptr(""), want: "/a/python3"},
		{name: "blank env falls back to toml", toml: `"/a/python3"`, env: ptr(" "), want: "/a/python3", warns: 1},
		{name: "NUL byte is unusable", toml: `"/a/py\u0000thon"`, want: "", warns: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			i := in{cwd: cwd, env: []string{"HOME=" + home}}
			if tc.toml != "" {
				i.toml = table("python_path = " + tc.toml)
			}
			if tc.env != nil {
				i.env = append(i.env, "LEMON_EXECUTE_CODE_PYTHON_PATH="+*tc.env)
			}
			r := load(t, i)
			require.NoError(t, r.err)
			assert.Equal(t, tc.want, r.cfg.PythonPath)
			assertWarnings(t, r.warnings, "python_path", tc.warns, `"`+tc.want+`"`)
		})
	}
}

func TestSandboxAcceptsNoneOrLandlock(t *testing.T) {
	cases := []struct {
		name  string
		toml  string
		env   *string
		want  string
		warns int
	}{
		{name: "absent", want: "none"},
		{name: "none", toml: `"none"`, want: "none"},
		{name: "empty is the older none", toml: `""`, want: "none"},
		{name: "landlock", toml: `"landlock"`, want: "landlock"},
		{name: "capitalised is none", toml: `"Landlock"`, want: "none", warns: 1},
		{name: "other is none", toml: `"seccomp"`, want: "none", warns: 1},
		{name: "env landlock beats toml none", toml: `"none"`, env: ptr("landlock"), want: "landlock"},
		{name: "env none beats toml landlock", toml: `"landlock"`, env: ptr("none"), want: "none"},
		{name: "malformed env keeps toml landlock", toml: `"landlock"`, env: ptr("landlok"), want: "landlock", warns: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			i := in{}
			if tc.toml != "" {
				i.toml = table("sandbox = " + tc.toml)
			}
			if tc.env != nil {
				i.env = []string{"LEMON_EXECUTE_CODE_SANDBOX=" + *tc.env}
			}
			r := load(t, i)
			require.NoError(t, r.err)
			assert.Equal(t, tc.want, r.cfg.Sandbox)
			assertWarnings(t, r.warnings, "sandbox", tc.warns, `"`+tc.want+`"`)
		})
	}
}

func TestPrecedenceIsOverrideThenEnvThenFileThenDefault(t *testing.T) {
	file := table(`timeout_ms = 1000
max_text_bytes = 1000
cpu_limit_seconds = 1000
python_path = "/file/python3"
tools = ["read"]
sandbox = "landlock"`)
	env := []string{
		"LEMON_EXECUTE_CODE_TIMEOUT_MS=2000",
		"LEMON_EXECUTE_CODE_MAX_TEXT_BYTES=2000",
		"LEMON_EXECUTE_CODE_CPU_LIMIT_SECONDS=2000",
		"LEMON_EXECUTE_CODE_PYTHON_PATH=/env/python3",
		"LEMON_EXECUTE_CODE_TOOLS=grep",
		"LEMON_EXECUTE_CODE_SANDBOX=",
	}
	over := map[string]any{
		"timeout_ms":        3000,
		"max_text_bytes":    int64(3000),
		"cpu_limit_seconds": "3000",
		"python_path":       "/over/python3",
		"tools":             "ls",
		"sandbox":           "",
	}

	r := load(t, in{})
	require.NoError(t, r.err)
	assert.Equal(t, Defaults(), r.cfg)

	r = load(t, in{toml: file})
	require.NoError(t, r.err)
	assert.Equal(t, []any{1000, 1000, 1000, "/file/python3", []string{"read"}, "landlock"}, picks(r.cfg))

	r = load(t, in{toml: file, env: env})
	require.NoError(t, r.err)
	assert.Equal(t, []any{2000, 2000, 2000, "/env/python3", []string{"grep"}, "landlock"}, picks(r.cfg),
		"an empty env value is unset, so the file's sandbox stays")

	r = load(t, in{toml: file, env: env, over: over})
	require.NoError(t, r.err)
	assert.Equal(t, []any{3000, 3000, 3000, "/over/python3", []string{"ls"}, "none"}, picks(r.cfg))
	assert.Empty(t, r.warnings)
}

func picks(c Config) []any {
	return []any{c.TimeoutMS, c.MaxTextBytes, c.CPULimitSeconds, c.PythonPath, c.Tools, c.Sandbox}
}

func TestOverridesAreCheckedStrictly(t *testing.T) {
	cases := []struct {
		name string
		over map[string]any
		want string
	}{
		{name: "unknown key", over: map[string]any{"mode": "session"}, want: "mode"},
		{name: "kernel_mode typo", over: map[string]any{"kernel_mode": "sesion"}, want: "kernel_mode"},
		{name: "kernel_mode not a string", over: map[string]any{"kernel_mode": true}, want: "kernel_mode"},
		{name: "integer key with text", over: map[string]any{"timeout_ms": "soon"}, want: "timeout_ms"},
		{name: "integer key with float", over: map[string]any{"timeout_ms": 1.5}, want: "timeout_ms"},
		{name: "tools of the wrong type", over: map[string]any{"tools": 3}, want: "tools"},
		{name: "enabled not a boolean", over: map[string]any{"enabled": "yes"}, want: "enabled"},
		{name: "sandbox unknown", over: map[string]any{"sandbox": "docker"}, want: "sandbox"},
		{name: "python_path not a string", over: map[string]any{"python_path": 3}, want: "python_path"},
		{name: "deny of the wrong type", over: map[string]any{"deny": []int{1}}, want: "deny"},
		{name: "approval timeout with text", over: map[string]any{"approval_timeout_ms": "later"}, want: "approval_timeout_ms"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := load(t, in{over: tc.over})
			require.ErrorIs(t, r.err, ErrOverride)
			assert.NotErrorIs(t, r.err, ErrFile)
			assert.Contains(t, r.err.Error(), tc.want)
		})
	}
}

func TestOverridesAcceptAnyIntegerTypeAndClampLikeOtherSources(t *testing.T) {
	r := load(t, in{over: map[string]any{
		"timeout_ms":       uint16(9),
		"max_rpc_calls":    int32(0),
		"max_output_bytes": uint64(math.MaxUint64),
		"nproc_limit":      nil,
	}})
	require.NoError(t, r.err)
	assert.Equal(t, 9, r.cfg.TimeoutMS)
	assert.Equal(t, 1, r.cfg.MaxRPCCalls)
	assert.Equal(t, math.MaxInt, r.cfg.MaxOutputBytes)
	assert.Equal(t, 0, r.cfg.NprocLimit, "a nil override is no override")
	assertWarnings(t, r.warnings, "max_rpc_calls", 1, "1")
}

func TestUnknownKeysAndVariablesAreWarnedOnce(t *testing.T) {
	r := load(t, in{
		toml: table("timeot_ms = 5\ntimeout_ms = 6"),
		env:  []string{"LEMON_EXECUTE_CODE_BOGUS=1", "LEMON_EXECUTE_CODEX=1", "OTHER_TIMEOUT_MS=9"},
	})
	require.NoError(t, r.err)
	assert.Equal(t, 6, r.cfg.TimeoutMS)
	require.Len(t, r.warnings, 2)
	assert.Equal(t, "timeot_ms", r.warnings[0].Key)
	assert.Contains(t, r.warnings[0].Message, "timeot_ms")
	assert.Equal(t, "bogus", r.warnings[1].Key)
	assert.Contains(t, r.warnings[1].Message, "LEMON_EXECUTE_CODE_BOGUS")
}

func TestWarningsNameTheSourceAndCapHugeValues(t *testing.T) {
	huge := strings.Repeat("x", 100000)
	r := load(t, in{env: []string{"LEMON_EXECUTE_CODE_MAX_RPC_CALLS=" + huge}})
	require.NoError(t, r.err)
	assert.Equal(t, 100, r.cfg.MaxRPCCalls)
	require.Len(t, r.warnings, 1)
	w := r.warnings[0]
	assert.Equal(t, "max_rpc_calls", w.Key)
	assert.Equal(t, "env LEMON_EXECUTE_CODE_MAX_RPC_CALLS", w.Source)
	assert.Equal(t, "100", w.Using)
	assert.LessOrEqual(t, len([]rune(w.Value)), maxShown)
	assert.Less(t, len(w.Message), 400, "the message must not carry the raw value")
}

func TestNumericStringsInTOMLAreNotAWrongType(t *testing.T) {
	r := load(t, in{toml: table(`timeout_ms = "500"
max_text_bytes = "600"
nproc_limit = "7"
enabled = "1"`)})
	require.NoError(t, r.err)
	assert.Equal(t, 500, r.cfg.TimeoutMS)
	assert.Equal(t, 600, r.cfg.MaxTextBytes)
	assert.Equal(t, 7, r.cfg.NprocLimit)
	assert.True(t, r.cfg.Enabled)
	assert.Empty(t, r.warnings)
}

func TestDurationsAndByteLimitsSaturate(t *testing.T) {
	c := Defaults()
	assert.Equal(t, "2m0s", c.Timeout().String())
	assert.Equal(t, "30m0s", c.KernelIdleTimeout().String())
	assert.Zero(t, c.CPULimit())
	assert.Equal(t, uint64(4096)<<20, c.MemoryLimitBytes())
	assert.Equal(t, uint64(1024)<<20, c.FsizeLimitBytes())

	c.TimeoutMS, c.CPULimitSeconds, c.MemoryLimitMB, c.FsizeLimitMB = math.MaxInt, math.MaxInt, math.MaxInt, 0
	assert.Equal(t, int64(math.MaxInt64), int64(c.Timeout()))
	assert.Equal(t, int64(math.MaxInt64), int64(c.CPULimit()))
	assert.Equal(t, uint64(math.MaxInt64), c.MemoryLimitBytes())
	assert.Zero(t, c.FsizeLimitBytes())
}

// intInput builds a Load input setting key in the file and/or the env.
func intInput(key, tomlValue, envValue string) in {
	i := in{}
	if tomlValue != "" {
		i.toml = table(key + " = " + tomlValue)
	}
	if envValue != "" {
		i.env = []string{EnvName(key) + "=" + envValue}
	}
	return i
}

// assertWarnings checks that exactly n warnings were logged, each for key
// and each naming the value finally used.
func assertWarnings(t *testing.T, ws []warning, key string, n int, using string) {
	t.Helper()
	require.Len(t, ws, n, "warnings: %+v", ws)
	for _, w := range ws {
		assert.Equal(t, "warn", w.Level)
		assert.Equal(t, key, w.Key)
		assert.Equal(t, using, w.Using)
		assert.Contains(t, w.Message, key)
		assert.NotEmpty(t, w.Source)
	}
}

func ptr(s string) *string { return &s }

package config

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"unicode/utf8"

	"github.com/executecode/executecode/tools"
	"github.com/rs/zerolog"
)

// FuzzLoad feeds arbitrary bytes as the TOML file and arbitrary values as
// two environment variables and the tools flag. Load must never panic,
// must fail only with ErrFile, must return a config every caller can use
// as is, must cap what warnings repeat, and must read its own TOML back.
func FuzzLoad(f *testing.F) {
	f.Add([]byte(table("timeout_ms = 5\ntools = [\"ls\", \"read\"]")), uint8(2), "42", uint8(8), "grep:bash", "")
	f.Add([]byte("[runtime.tools.execute_code]\nenabled = [true]\n"), uint8(0), "yes", uint8(9), "session", "read")
	f.Add([]byte("[runtime.tools]\nexecute_code = { kernel_mode = 'session', max_text_bytes = \"0\" }"), uint8(9), "", uint8(17), "landlock", "")
	f.Add([]byte("timeout_ms = = 3"), uint8(1), "~/py", uint8(13), "-1", "none")
	f.Add([]byte{}, uint8(200), "x", uint8(3), "99999999999999999999", ",:,")
	f.Add([]byte(table("allow = [\"bash\"]\ndeny = \"read,read\"\nrequire_approval = []")), uint8(20), "webfetch,none", uint8(21), "0", "")

	f.Fuzz(func(t *testing.T, doc []byte, k1 uint8, v1 string, k2 uint8, v2, toolsFlag string) {
		dir := t.TempDir()
		path := filepath.Join(dir, "c.toml")
		if err := os.WriteFile(path, doc, 0o600); err != nil {
			t.Fatal(err)
		}
		env := []string{"HOME=/home/fuzz", fuzzEnvName(k1) + "=" + v1, fuzzEnvName(k2) + "=" + v2}
		var over map[string]any
		if toolsFlag != "" {
			over = map[string]any{"tools": toolsFlag}
		}

		var logs bytes.Buffer
		log := zerolog.New(&logs)
		cfg, err := Load(Options{File: path, Env: env, Cwd: dir, Overrides: over, Logger: &log})
		if err != nil {
			if !errors.Is(err, ErrFile) {
				t.Fatalf("error does not wrap ErrFile: %v", err)
			}
			return
		}
		checkUsable(t, cfg)
		for _, w := range decodeWarnings(t, logs.Bytes()) {
			if utf8.RuneCountInString(w.Value) > maxShown || utf8.RuneCountInString(w.Key) > maxShown {
				t.Fatalf("warning repeats too much: %+v", w)
			}
		}

		rendered := cfg.TOML()
		if err := os.WriteFile(path, []byte(rendered), 0o600); err != nil {
			t.Fatal(err)
		}
		logs.Reset()
		again, err := Load(Options{File: path, Env: []string{}, Cwd: dir, Logger: &log})
		if err != nil {
			t.Fatalf("rendered config does not load: %v\n%s", err, rendered)
		}
		if !equalConfig(cfg, again) {
			t.Fatalf("round trip changed the config:\n%+v\n%+v\n%s", cfg, again, rendered)
		}
		if logs.Len() != 0 {
			t.Fatalf("rendered config warns: %s\n%s", logs.String(), rendered)
		}
	})
}

// fuzzEnvName maps a byte to a known variable, or now and then to an
// unknown one.
func fuzzEnvName(i uint8) string {
	if int(i) < len(keys) {
		return EnvName(keys[i].name)
	}
	return EnvPrefix + "UNKNOWN"
}

func checkUsable(t *testing.T, c Config) {
	t.Helper()
	for _, n := range []int{c.TimeoutMS, c.MaxRPCCalls, c.MaxOutputBytes, c.MaxTextBytes, c.MaxParallelRPC,
		c.KernelIdleTimeoutMS, c.MaxLiveKernels, c.MaxQueuedCellsPerKernel, c.ApprovalTimeoutMS} {
		if n < 1 {
			t.Fatalf("bound below 1: %+v", c)
		}
	}
	if c.MaxRPCResultBytes < 1 {
		t.Fatalf("max_rpc_result_bytes below 1: %+v", c)
	}
	for _, n := range []int{c.CPULimitSeconds, c.MemoryLimitMB, c.FsizeLimitMB, c.NprocLimit} {
		if n < 0 {
			t.Fatalf("negative limit: %+v", c)
		}
	}
	if c.WarmInterpreters < 0 || c.WarmInterpreters > MaxWarmInterpreters {
		t.Fatalf("warm_interpreters %d", c.WarmInterpreters)
	}
	if c.KernelMode != PerCall && c.KernelMode != Session {
		t.Fatalf("kernel mode %q", c.KernelMode)
	}
	if c.Sandbox != SandboxNone && c.Sandbox != SandboxLandlock {
		t.Fatalf("sandbox %q", c.Sandbox)
	}
	if c.Tools == nil {
		t.Fatal("nil tools")
	}
	for _, name := range c.Tools {
		if !slices.Contains(tools.Allowlist, name) {
			t.Fatalf("tool %q outside the allowlist", name)
		}
	}
	checkPolicyList(t, "allow", c.Allow, true)
	checkPolicyList(t, "deny", c.Deny, false)
	checkPolicyList(t, "require_approval", c.RequireApproval, false)
	if c.PythonPath != "" && !filepath.IsAbs(c.PythonPath) {
		t.Fatalf("relative python path %q", c.PythonPath)
	}
}

// checkPolicyList: a non-nil set of allowlist members; only allow may
// instead be exactly [NoTools].
func checkPolicyList(t *testing.T, key string, list []string, mayBeNone bool) {
	t.Helper()
	if list == nil {
		t.Fatalf("%s is nil", key)
	}
	if mayBeNone && slices.Equal(list, []string{NoTools}) {
		return
	}
	for i, name := range list {
		if !slices.Contains(tools.Allowlist, name) || slices.Contains(list[:i], name) {
			t.Fatalf("%s = %q: %q is outside the allowlist or repeated", key, list, name)
		}
	}
}

func equalConfig(a, b Config) bool {
	return reflect.DeepEqual(a, b)
}

package config

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"strings"

	"github.com/knadh/koanf/parsers/toml/v2"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/v2"
	gotoml "github.com/pelletier/go-toml/v2"
)

// source is one layer's values for the execute_code keys, by key name.
type source struct {
	label  func(key string) string // how warnings name the layer
	values map[string]any
}

// candidate is one layer's raw value for a key.
type candidate struct {
	label string
	value any
}

// recordingFile keeps the bytes koanf read, so a type error found after
// parsing can be located in the same text that was parsed.
type recordingFile struct {
	*file.File
	data []byte
}

func (r *recordingFile) ReadBytes() ([]byte, error) {
	b, err := r.File.ReadBytes()
	if err != nil {
		return nil, err
	}
	if b == nil {
		b = []byte{} // nil data means "never read"
	}
	r.data = b
	return b, nil
}

// fileSource reads [runtime.tools.execute_code] from path. Unknown keys are
// warnings; a value of the wrong TOML type is an error.
func fileSource(path string, w *warner) (source, error) {
	src := source{label: func(string) string { return "file " + path }}
	if path == "" {
		return src, nil
	}
	rec := &recordingFile{File: file.Provider(path)}
	k := koanf.New(".")
	if err := k.Load(rec, depthGuard{toml.Parser()}); err != nil {
		return src, fileLoadError(path, rec.data, err)
	}
	doc := k.Raw()
	table, err := executeCodeTable(path, rec.data, doc)
	if err != nil {
		return src, err
	}
	if legacy, ok := doc["tools"].(map[string]any); ok {
		if _, ok := legacy["execute_code"]; ok {
			w.log.Warn().Str("key", "tools.execute_code").Str("source", "file "+path).Str("using", "ignored").
				Msg("config: the legacy [tools.execute_code] table is ignored; use [runtime.tools.execute_code]")
		}
	}
	for _, name := range unknownKeys(table) {
		w.log.Warn().Str("key", capRunes(name, maxShown)).Str("source", "file "+path).Str("using", "ignored").
			Msgf("config: unknown key %s in [runtime.tools.execute_code] of %s is ignored", capRunes(name, maxShown), path)
	}
	src.values = table
	return src, nil
}

// executeCodeTable finds the table in a decoded document and checks the
// TOML type of every known key in it; nil when the document has no table.
//
// A file without a [runtime ...] table whose top level holds execute_code
// keys is a bare fragment (what a `--config` file for this tool alone
// naturally looks like): its top level is the table.
func executeCodeTable(path string, data []byte, doc map[string]any) (map[string]any, error) {
	table, prefix := doc, slices.Clone(tablePath)
	if _, full := doc[tablePath[0]]; !full && isFragment(doc) {
		prefix = nil
	} else {
		for i, name := range tablePath {
			v, ok := table[name]
			if !ok {
				return nil, nil
			}
			m, ok := v.(map[string]any)
			if !ok {
				return nil, typeError(path, data, tablePath[:i+1], v, "a table")
			}
			table = m
		}
	}
	for _, k := range keys {
		v, ok := table[k.name]
		if !ok {
			continue
		}
		if want := fileTypeWant(k.kind, v); want != "" {
			return nil, typeError(path, data, append(slices.Clone(prefix), k.name), v, want)
		}
	}
	return table, nil
}

// isFragment reports whether a document's top level names any
// execute_code key.
func isFragment(doc map[string]any) bool {
	for _, k := range keys {
		v, ok := doc[k.name]
		if _, table := v.(map[string]any); ok && !table {
			// A table named like a key (the legacy [tools.execute_code])
			// does not make a fragment.
			return true
		}
	}
	return false
}

// maxDepth bounds how deeply a config file may nest tables and arrays.
// koanf flattens nested tables in time and memory quadratic in their depth
// (a 60 KB file of 10,000 nested inline tables takes a gigabyte), and no
// real configuration nests more than a handful of levels.
const maxDepth = 64

// depthGuard refuses too deep a document after parsing and before koanf
// flattens it.
type depthGuard struct{ koanf.Parser }

func (g depthGuard) Unmarshal(b []byte) (map[string]any, error) {
	m, err := g.Parser.Unmarshal(b)
	if err != nil {
		return nil, err
	}
	if path, deep := tooDeep(m, nil, 0); deep {
		return nil, &depthError{path: path}
	}
	return m, nil
}

type depthError struct{ path []string }

func (e *depthError) Error() string {
	return fmt.Sprintf("tables and arrays nest deeper than %d levels", maxDepth)
}

// tooDeep reports whether v nests deeper than maxDepth, with the table keys
// on the way down.
func tooDeep(v any, path []string, depth int) ([]string, bool) {
	if depth > maxDepth {
		return path, true
	}
	switch x := v.(type) {
	case map[string]any:
		for name, e := range x {
			if p, deep := tooDeep(e, append(path, name), depth+1); deep {
				return p, true
			}
		}
	case []any:
		for _, e := range x {
			if p, deep := tooDeep(e, path, depth+1); deep {
				return p, true
			}
		}
	case []map[string]any:
		for _, e := range x {
			if p, deep := tooDeep(e, path, depth+1); deep {
				return p, true
			}
		}
	}
	return nil, false
}

func fileLoadError(path string, data []byte, err error) error {
	if data == nil {
		msg := err.Error()
		var pe *fs.PathError
		if errors.As(err, &pe) {
			msg = "cannot " + pe.Op + ": " + pe.Err.Error()
		}
		return &FileError{Path: path, Msg: msg, Err: err}
	}
	fe := &FileError{Path: path, Msg: err.Error(), Err: err}
	var deep *depthError
	if errors.As(err, &deep) {
		// Name the deepest key on the way down that the text defines.
		for n := len(deep.path); n > 0 && fe.Line == 0; n-- {
			if l := keyLine(data, deep.path[:n]); l > 0 {
				fe.Line, fe.Key = l, capRunes(dotted(deep.path[:n]), maxShown)
			}
		}
	}
	var de *gotoml.DecodeError
	if errors.As(err, &de) {
		fe.Line, _ = de.Position()
		fe.Key = dotted(de.Key())
		if fe.Key == "" {
			fe.Key = keyOnLine(data, fe.Line)
		}
	}
	return fe
}

func typeError(path string, data []byte, keyPath []string, v any, want string) error {
	return &FileError{
		Path: path,
		Line: keyLine(data, keyPath),
		Key:  dotted(keyPath),
		Msg:  fmt.Sprintf("wrong type %s; want %s", typeName(v), want),
	}
}

// fileTypeWant is "" when v has a TOML type the key accepts, else what the
// key wants. Numeric strings are accepted for numeric keys (the reference
// parses them); floats and booleans are not numbers here.
func fileTypeWant(k kind, v any) string {
	switch k {
	case kindBool:
		switch v.(type) {
		case bool, int64, string:
			return ""
		}
		return "a boolean, 0/1 or a string"
	case kindPath, kindMode, kindSandbox:
		if _, ok := v.(string); ok {
			return ""
		}
		return "a string"
	case kindDeclaredInt, kindBound, kindLimit, kindCount:
		switch v.(type) {
		case int64, string:
			return ""
		}
		return "an integer or a numeric string"
	case kindTools, kindPolicy:
		if _, ok := toolNames(v); ok {
			return ""
		}
		return "an array of strings or a comma-separated string"
	}
	return "nothing"
}

func unknownKeys(table map[string]any) []string {
	var out []string
	for name := range table {
		if _, ok := lookupKey(name); !ok {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// envSource reads LEMON_EXECUTE_CODE_* variables and their
// EXECUTE_CODE_* aliases; where both name a key, the LEMON_ form wins. An
// empty value counts as unset, except for kernel_mode, where any set value
// wins (see resolveMode). Unknown LEMON_ names are warned about; unknown
// EXECUTE_CODE_ names are not, since the runtime's own internal variables
// share that prefix.
func envSource(environ []string, w *warner) (source, error) {
	used := map[string]string{} // key -> the variable that set it
	src := source{label: func(k string) string {
		if name, ok := used[k]; ok {
			return "env " + name
		}
		return "env " + EnvName(k)
	}}
	src.values = map[string]any{}
	for _, prefix := range []string{AliasPrefix, EnvPrefix} {
		raw, err := envValues(environ, prefix)
		if err != nil {
			return src, err
		}
		var unknown []string
		for name, v := range raw {
			key, ok := lookupKey(name)
			if !ok {
				unknown = append(unknown, name)
				continue
			}
			if s, _ := v.(string); s == "" && key.kind != kindMode {
				continue
			}
			src.values[name] = v
			used[name] = prefix + strings.ToUpper(name)
		}
		if prefix != EnvPrefix {
			continue
		}
		sort.Strings(unknown)
		for _, name := range unknown {
			w.log.Warn().Str("key", capRunes(name, maxShown)).Str("source", "env "+capRunes(EnvName(name), maxShown)).Str("using", "ignored").
				Msgf("config: unknown environment variable %s is ignored", capRunes(EnvName(name), maxShown))
		}
	}
	return src, nil
}

// envValues reads the variables named prefix+KEY, keyed by lower-case KEY.
func envValues(environ []string, prefix string) (map[string]any, error) {
	k := koanf.New(".")
	err := k.Load(env.Provider("", env.Opt{
		Prefix: prefix,
		TransformFunc: func(name, value string) (string, any) {
			return strings.ToLower(strings.TrimPrefix(name, prefix)), value
		},
		EnvironFunc: func() []string { return environ },
	}), nil)
	if err != nil {
		return nil, fmt.Errorf("read environment: %w", err)
	}
	return k.Raw(), nil
}

// overrideSource checks overrides strictly (an unknown key or a value its
// key cannot take is ErrOverride) and loads them as the top layer.
func overrideSource(overrides map[string]any) (source, error) {
	src := source{label: func(k string) string { return "override " + k }}
	clean := make(map[string]any, len(overrides))
	names := make([]string, 0, len(overrides))
	for name := range overrides {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		v := overrides[name]
		key, ok := lookupKey(name)
		if !ok {
			return src, fmt.Errorf("%w: unknown key %s", ErrOverride, shown(name))
		}
		if v == nil {
			continue
		}
		if why := overrideProblem(key.kind, v); why != "" {
			return src, fmt.Errorf("%w: %s = %s: %s", ErrOverride, name, shown(v), why)
		}
		if list, isList := v.([]string); isList {
			v = append([]string(nil), list...)
		}
		clean[name] = v
	}
	k := koanf.New(".")
	if err := k.Load(confmap.Provider(clean, ""), nil); err != nil {
		return src, fmt.Errorf("%w: %w", ErrOverride, err)
	}
	src.values = k.Raw()
	return src, nil
}

func overrideProblem(k kind, v any) string {
	switch k {
	case kindBool:
		if _, ok := parseBool(v); !ok {
			return "want true, false, 1 or 0"
		}
	case kindPath:
		if _, ok := v.(string); !ok {
			return "want a string"
		}
	case kindDeclaredInt, kindBound, kindLimit, kindCount:
		if _, ok, _ := parseInt(v); !ok {
			return "want an integer"
		}
	case kindTools, kindPolicy:
		if _, ok := toolNames(v); !ok {
			return "want a list of tool names"
		}
	case kindMode:
		if s, _ := v.(string); s != string(PerCall) && s != string(Session) {
			return "want per_call or session"
		}
	case kindSandbox:
		if s, _ := v.(string); s != "" && s != SandboxNone && s != SandboxLandlock {
			return "want none or landlock"
		}
	}
	return ""
}

// candidates lists the layers' values for key, highest precedence first.
func candidates(name string, layers []source) []candidate {
	var out []candidate
	for _, l := range layers {
		if v, ok := l.values[name]; ok && v != nil {
			out = append(out, candidate{label: l.label(name), value: v})
		}
	}
	return out
}

package telemetry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// every event type of the package, one value each.
var catalog = []Event{
	ExecuteCodeStop{}, SessionStart{}, SessionStop{}, SessionCrash{}, SessionReap{}, SessionEvict{},
	CellStart{}, CellStop{}, CellCancel{}, Fallback{}, BridgeDeny{}, ApprovalRequested{}, ApprovalResolved{},
}

// eventTypeNames lists, from the package's source, every type with a
// Name() method: the catalog above must not miss a new one.
func eventTypeNames(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", nil, 0)
	require.NoError(t, err)
	var names []string
	for _, f := range pkgs["telemetry"].Files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || fd.Name.Name != "Name" {
				continue
			}
			typ := fd.Recv.List[0].Type
			if star, ok := typ.(*ast.StarExpr); ok {
				typ = star.X
			}
			names = append(names, typ.(*ast.Ident).Name)
		}
	}
	sort.Strings(names)
	return names
}

func TestTheCatalogHasEveryEventType(t *testing.T) {
	var have []string
	for _, e := range catalog {
		have = append(have, reflect.TypeOf(e).Name())
	}
	sort.Strings(have)
	assert.Equal(t, eventTypeNames(t), have)
}

// Redaction by construction: an event's fields are integers, durations, an
// optional exit code and enums of this package; nothing can hold free
// text. An enum set to arbitrary text (the marker) is written, printed and
// summarised as its list's default, never as the text.
func TestEventsCannotCarryFreeText(t *testing.T) {
	const marker = "MARKER-/home/user/secret.py-token"
	for _, proto := range catalog {
		t.Run(proto.Name(), func(t *testing.T) {
			v := reflect.New(reflect.TypeOf(proto)).Elem()
			for i := range v.NumField() {
				f, sf := v.Field(i), v.Type().Field(i)
				switch {
				case f.Kind() == reflect.Int:
					f.SetInt(-7)
				case sf.Type == reflect.TypeFor[time.Duration]():
					f.SetInt(int64(-time.Second))
				case sf.Type == reflect.TypeFor[*int]():
					n := 3
					f.Set(reflect.ValueOf(&n))
				case f.Kind() == reflect.String:
					require.Equal(t, reflect.TypeOf(proto).PkgPath(), sf.Type.PkgPath(), "%s is an enum of this package", sf.Name)
					_, hasString := sf.Type.MethodByName("String")
					require.True(t, hasString, "%s prints through its allowlist", sf.Name)
					f.SetString(marker)
				default:
					t.Fatalf("field %s has type %s: events carry counts, durations and enums only", sf.Name, sf.Type)
				}
			}
			e := v.Interface().(Event)

			var buf bytes.Buffer
			logLine(&buf, e)
			line := buf.String()
			printed := fmt.Sprintf("%v %+v", e, e)
			assert.NotContains(t, line, "MARKER")
			assert.NotContains(t, printed, "MARKER")
			var fields map[string]any
			require.NoError(t, json.Unmarshal(buf.Bytes(), &fields))
			for k, val := range fields {
				if n, ok := val.(float64); ok && k != "exit_code" {
					assert.GreaterOrEqual(t, n, 0.0, "%s is coerced to a non-negative count", k)
				}
			}
			if s, ok := Summarize(e); ok {
				for k, val := range s.Metadata {
					assert.NotContains(t, val, "MARKER", k)
				}
				for k, n := range s.Measurements {
					assert.GreaterOrEqual(t, n, int64(0), k)
				}
			}
		})
	}
}

func TestEveryPythonReplEventHasASummaryAndNoOtherDoes(t *testing.T) {
	want := map[string]string{
		"coding_agent.python_repl.session.start": "session_started",
		"coding_agent.python_repl.session.stop":  "session_stopped",
		"coding_agent.python_repl.session.crash": "session_crashed",
		"coding_agent.python_repl.session.reap":  "session_reaped",
		"coding_agent.python_repl.session.evict": "session_evicted",
		"coding_agent.python_repl.cell.start":    "cell_started",
		"coding_agent.python_repl.cell.stop":     "cell_stopped",
		"coding_agent.python_repl.cell.cancel":   "cell_cancelled",
		"coding_agent.python_repl.fallback":      "fallback",
		"coding_agent.python_repl.bridge.deny":   "bridge_denied",
		"coding_agent.execute_code.stop":         "",
		"lemon.approvals.requested":              "",
		"lemon.approvals.resolved":               "",
	}
	for _, e := range catalog {
		s, ok := Summarize(e)
		assert.Equal(t, want[e.Name()] != "", ok, e.Name())
		assert.Equal(t, want[e.Name()], s.Event, e.Name())
		assert.Equal(t, strings.HasPrefix(e.Name(), "coding_agent.python_repl."), ok, e.Name())
	}
}

// The summary and the log line are written by the same code: same keys,
// same values.
func TestASummaryHoldsExactlyWhatTheLogLineHolds(t *testing.T) {
	events := []Event{
		CellStop{Duration: 1500 * time.Millisecond, Outcome: OutcomeTimeout, DroppedLateOutput: 12},
		SessionCrash{Duration: time.Minute, LiveKernels: 2, Capacity: 16, Reason: CrashPortExit},
		SessionEvict{Idle: time.Second, LiveKernels: 3, Capacity: 4},
		BridgeDeny{},
	}
	for _, e := range events {
		var buf bytes.Buffer
		logLine(&buf, e)
		var line map[string]any
		require.NoError(t, json.Unmarshal(buf.Bytes(), &line))
		s, ok := Summarize(e)
		require.True(t, ok)
		flat := map[string]any{}
		for k, v := range s.Measurements {
			flat[k] = float64(v)
		}
		for k, v := range s.Metadata {
			flat[k] = v
		}
		assert.Equal(t, line, flat, e.Name())
	}
}

func TestLogHandlerWritesOneLinePerEvent(t *testing.T) {
	var buf bytes.Buffer
	h := LogHandler{Logger: zerolog.New(&buf)}
	h.Handle(CellStop{Duration: 12 * time.Millisecond, Outcome: OutcomeOK})
	h.Handle(BridgeDeny{})
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 2)
	assert.JSONEq(t, `{"level":"info","event":"coding_agent.python_repl.cell.stop","count":1,"duration_ms":12,"outcome":"ok","dropped_late_output_bytes":0,"message":"telemetry"}`, lines[0])
	assert.JSONEq(t, `{"level":"info","event":"coding_agent.python_repl.bridge.deny","count":1,"reason":"authentication","message":"telemetry"}`, lines[1])
}

func logLine(buf *bytes.Buffer, e Event) {
	l := zerolog.New(buf)
	l.Log().EmbedObject(e).Send()
}

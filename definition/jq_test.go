package definition

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/itchyny/gojq"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestCheckQuery(t *testing.T) {
	tests := []struct {
		src  string
		want string // "" = allowed
	}{
		{".spec.replicas", ""},
		{`.spec.replicatedJobs[] | (.replicas // 1) * (.template.spec.parallelism // 1)`, ""},
		{`getpath(["spec","x"])`, ""},
		{`[limit(3; .spec.items[])]`, ""},
		{`if .a then error("x") else 1 end`, ""},
		{`.a as [$x, {b: $y}] | $x`, ""},
		{`def f: .a; f`, ""},
		{".a = 1", "assignment (=)"},
		{".a |= 1", "assignment (|=)"},
		{".a += 1", "assignment (+=)"},
		{".a -= 1", "assignment (-=)"},
		{".a *= 1", "assignment (*=)"},
		{".a /= 1", "assignment (/=)"},
		{".a %= 1", "assignment (%=)"},
		{".a //= 1", "assignment (//=)"},
		{"del(.a)", "del modifies"},
		{"..", "recursive descent"},
		{"[.. | numbers]", "recursive descent"},
		{"recurse", "recurse"},
		{"walk(.)", "walk"},
		{"[range(10)]", "range"},
		{"[limit(5; repeat(1))]", "repeat"},
		{"[paths]", "paths"},
		{"[leaf_paths]", "leaf_paths"},
		{"env.HOME", "env"},
		{"$ENV.HOME", "$ENV"},
		{"input", "input"},
		{"[inputs]", "inputs"},
		{"debug", "debug"},
		{"stderr", "stderr"},
		{"input_filename", "input_filename"},
		{"halt", "halt"},
		{`halt_error`, "halt_error"},
		{"setpath([\"a\"]; 1)", "setpath"},
		{"delpaths([[\"a\"]])", "delpaths"},
		{"$__loc__", "$__loc__"},
		{"_range(0; 10; 1)", "internal"},
		// Banned constructs hidden in every kind of node.
		{"def f: del(.a); f", "del"},
		{`{a: (.x |= 1)}`, "assignment"},
		{`{(.x |= "k"): 1}`, "assignment"},
		{`"\(.a |= 1)"`, "assignment"},
		{`.[.a |= 1]`, "assignment"},
		{`.[1:(.a |= 1)]`, "assignment"},
		{`try (.a |= 1) catch .`, "assignment"},
		{`try 1 catch (.a |= 1)`, "assignment"},
		{`reduce .[] as $x (0; . += $x)`, "assignment"},
		{`foreach .[] as $x (0; .; range(1))`, "range"},
		{`if .a then 1 elif (.b |= 1) then 2 else 3 end`, "assignment"},
		{`if .a then 1 else [..] end`, "recursive descent"},
		{`label $out | recurse`, "recurse"},
		{`-(.a |= 1)`, "assignment"},
		{`"x\(env)"`, "env"},
		{`[.[] | {a: [.b | walk(.)]}]`, "walk"},
		{`. as {(env.X): $v} | $v`, "env"},
		{`def walk(f): f; walk(.)`, "walk"},
	}
	for _, tc := range tests {
		t.Run(tc.src, func(t *testing.T) {
			q, err := gojq.Parse(tc.src)
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			got := checkQuery(q)
			if tc.want == "" {
				if got != "" {
					t.Fatalf("rejected: %s", got)
				}
				return
			}
			if !strings.Contains(got, tc.want) {
				t.Fatalf("reason %q, want it to mention %q", got, tc.want)
			}
		})
	}
}

// Runaway expressions that pass validation end with an error under the
// deadline instead of hanging.
func TestEvalRunaway(t *testing.T) {
	tests := []struct {
		src, want string
	}{
		// Every loop a definition can write ends by its step budget; the
		// ones jq makes unbounded (recursion, until, while, repeat, range)
		// are refused before they run (TestBombsRefused).
		{"[.[] as $a | .[] as $b | .[] as $c | $a] | length", "steps"},
		{".[], .[]", "too many results"},
	}
	big := make([]any, 2000)
	for i := range big {
		big[i] = i
	}
	for _, tc := range tests {
		t.Run(tc.src, func(t *testing.T) {
			e, fe := compileJQ(field.NewPath("spec", "x"), tc.src)
			if fe != nil {
				t.Fatalf("compile: %v", fe)
			}
			c := &Compiled{opts: Options{Timeout: time.Minute, MaxResults: 1000}.withDefaults()}
			_, err := c.eval(ctxT, e, big)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want %q", err, tc.want)
			}
			var ee *EvalError
			if !errors.As(err, &ee) || ee.Field != "spec.x" {
				t.Fatalf("error %v does not name the field", err)
			}
		})
	}
}

func TestToJQ(t *testing.T) {
	shared := map[string]any{"name": "x", "tags": []any{"a"}}
	in := map[string]any{"n": int64(3), "meta": shared, "list": []any{int64(1), 2.5, "s", nil, true}, "i32": int32(4)}
	out := toJQ(in).(map[string]any)
	if out["n"] != 3 || out["i32"] != 4 || out["list"].([]any)[0] != 1 {
		t.Fatalf("ints not converted: %#v", out)
	}
	if in["n"] != int64(3) {
		t.Fatal("input changed")
	}
	// A subtree without anything to convert is shared, not copied.
	if m := out["meta"].(map[string]any); &m == nil || len(m) != 2 {
		t.Fatal("lost subtree")
	}
	shared["probe"] = 1
	if _, ok := out["meta"].(map[string]any)["probe"]; !ok {
		t.Error("unchanged subtree was copied")
	}
	// gojq accepts the result.
	q, _ := gojq.Parse(".n + .list[0]")
	v, _ := q.Run(out).Next()
	if v != 4 {
		t.Fatalf("gojq result %v", v)
	}
}

func TestRender(t *testing.T) {
	for _, tc := range []struct {
		in   any
		want string
	}{{"s", "s"}, {true, "true"}, {3, "3"}, {2.0, "2"}, {2.5, "2.5"}, {nil, "null"}, {[]any{1, "a"}, `[1,"a"]`}, {map[string]any{"a": 1}, `{"a":1}`}} {
		if got := render(tc.in); got != tc.want {
			t.Errorf("render(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

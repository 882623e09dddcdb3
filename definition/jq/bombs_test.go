package jq

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// bombInput is a workload-sized input: a spec with a 1 MiB string (etcd
// keeps objects up to 1.5 MiB) and a list of 2000 numbers.
func bombInput() map[string]any {
	list := make([]any, 2000)
	for i := range list {
		list[i] = i
	}
	return map[string]any{
		"spec": map[string]any{"replicas": 2, "text": strings.Repeat(`"q"`, 1<<20/3), "list": list},
	}
}

// reduceOver builds reduce over n literal values, the only way a definition
// can loop without a generator from its input.
func reduceOver(n int, start, update string) string {
	return fmt.Sprintf("reduce (%s) as $x (%s; %s)", strings.TrimSuffix(strings.Repeat("1,", n), ","), start, update)
}

// bombs are the expressions of issue 14 and their relatives: each is
// refused when the definition is validated, or stopped by its budget when it
// runs.
var bombs = []struct {
	name, src string
	refused   string // substring of the validation error; "" = it compiles
	stopped   string // substring of the evaluation error
}{
	{name: "string repetition", src: `("x" * 1000000000) | length`, stopped: "more than 64 MiB"},
	{name: "repetition of input", src: `(.spec.text * 100) | length`, stopped: "more than 64 MiB"},
	{name: "recursion into an array", src: `def f: [f]; f`, refused: "calls itself"},
	{name: "plain recursion", src: `def f: f; f`, refused: "calls itself"},
	{name: "mutual recursion", src: `def a: b; def b: [a]; a`, refused: "calls itself"},
	{name: "huge error message", src: `error("x" * 1000000)`, stopped: "bytes)"},
	{name: "range", src: `[range(1000000000)] | length`, refused: "range"},
	{name: "repeat", src: `[limit(1000000000; repeat(1))] | length`, refused: "repeat"},
	{name: "until", src: `0 | until(. > 1e12; . + 1)`, refused: "until"},
	{name: "while", src: `[0 | while(true; . + 1)] | length`, refused: "while"},
	{name: "doubling by reduce", src: reduceOver(40, `"xx"`, `. + .`), stopped: "more than 64 MiB"},
	{name: "doubling arrays", src: reduceOver(40, `[1]`, `. + .`), stopped: "more than 64 MiB"},
	{name: "squaring numbers", src: reduceOver(40, `3`, `. * .`), stopped: "bits"},
	{name: "nested tojson", src: `.spec.text` + strings.Repeat(" | tojson", 30), stopped: "more than 64 MiB"},
	{name: "tojson of shared references", src: `[.spec.text, .spec.text, .spec.text, .spec.text, .spec.text, .spec.text, .spec.text, .spec.text, .spec.text, .spec.text, .spec.text, .spec.text, .spec.text, .spec.text, .spec.text, .spec.text, .spec.text, .spec.text, .spec.text, .spec.text] | tojson | length`, stopped: "more than 64 MiB"},
	{name: "join of shared references", src: `. as $r | [.spec.list[] | $r.spec.text] | join("") | length`, stopped: "more than 64 MiB"},
	{name: "add of shared references", src: `. as $r | [.spec.list[] | $r.spec.text] | add | length`, stopped: "more than 64 MiB"},
	{name: "join with a big separator", src: `. as $r | [.spec.list[] | tostring] | join($r.spec.text) | length`, stopped: "more than 64 MiB"},
	{name: "location", src: `$__loc__`, refused: "outside the document"},
	{name: "interpolation of input", src: `"\(.)\(.)\(.)\(.)\(.)\(.)\(.)\(.)\(.)\(.)\(.)\(.)" | length`, stopped: "more than 64 MiB"},
	{name: "split to characters, many times", src: `[.spec.text | split(""), split(""), split(""), split("")] | length`, stopped: "more than 64 MiB"},
	{name: "fromjson of a built string", src: `("[" + ("[]," * 5000000) + "[]]") | fromjson | length`, stopped: "more than 64 MiB"},
	{name: "sorting copies", src: `. as $r | [.spec.list[] | $r.spec.list | sort] | length`, stopped: "more than 64 MiB"},
	{name: "indices of a big string", src: `[.spec.text | indices("q"), indices("x"), indices("y")] | length`, stopped: "more than 64 MiB"},
	{name: "interpolation inside a generator", src: `. as $r | ["\(.spec.list[])\($r.spec.text)"] | length`, stopped: "more than 64 MiB"},
	{name: "error of shared references", src: `error([.spec.text, .spec.text, .spec.text, .spec.text, .spec.text, .spec.text, .spec.text, .spec.text])`, stopped: "more than 64 MiB"},
	{name: "quadratic iteration", src: `[.spec.list[] as $a | .spec.list[] as $b | $a] | length`, stopped: "steps"},
	{name: "format string", src: `@base64 "\(.spec.text)"`, refused: "format"},
	{name: "reserved variable", src: `. as $__muster_budget | 1`, refused: "reserved"},
	{name: "the budget itself", src: `$__muster_budget`, refused: "internal"},
}

// TestBombs: no expression crashes the process, runs past its budget or
// allocates much more than MaxEvalBytes in one evaluation.
func TestBombs(t *testing.T) {
	in := Value(bombInput())
	for _, tc := range bombs {
		t.Run(tc.name, func(t *testing.T) {
			e, err := Compile(tc.src, nil)
			if tc.refused != "" {
				if err == nil || !strings.Contains(err.Error(), tc.refused) {
					t.Fatalf("validation error = %v, want it to contain %q", err, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err = e.Run(ctxT, in, limitsT(time.Minute), nil)
			runtime.ReadMemStats(&after)
			if err == nil || !strings.Contains(err.Error(), tc.stopped) {
				t.Fatalf("error = %v, want it to contain %q", err, tc.stopped)
			}
			if n := len(err.Error()); n > 2*maxMessage+len(tc.src) {
				t.Errorf("error message is %d bytes", n)
			}
			// The budget counts what the growth constructs build; the
			// rest of an evaluation (the input walk, small values per
			// step) stays within the same order.
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > MaxEvalBytes+8<<20 {
				t.Errorf("allocated %d MiB, want at most %d", alloc>>20, (MaxEvalBytes+8<<20)>>20)
			}
		})
	}
}

// TestBudgetKeepsSemantics: the guards change nothing for expressions that
// stay within the budget, including the order of generator results.
func TestBudgetKeepsSemantics(t *testing.T) {
	tests := []struct {
		src  string
		in   any
		want []any
	}{
		{`(1,2) + (10,20)`, nil, []any{11, 12, 21, 22}},
		{`"x" * 3`, nil, []any{"xxx"}},
		{`{"a": {"b": 1}} * {"a": {"c": 2}}`, nil, []any{map[string]any{"a": map[string]any{"b": 1, "c": 2}}}},
		{`"a,b" / ","`, nil, []any{[]any{"a", "b"}}},
		{`.a + .b`, map[string]any{"a": "x", "b": "y"}, []any{"xy"}},
		{`[.[] | tostring] | join("-")`, []any{1, 2}, []any{"1-2"}},
		{`"\(.a)-\(.b)"`, map[string]any{"a": 1, "b": "s"}, []any{"1-s"}},
		{`{"\(.a)": 1}`, map[string]any{"a": "k"}, []any{map[string]any{"k": 1}}},
		{`reduce .[] as $x (0; . + $x)`, []any{1, 2, 3}, []any{6}},
		{`[.[] | . * 2]`, []any{1, 2}, []any{[]any{2, 4}}},
		{`def double: . * 2; map(double)`, []any{1, 2}, []any{[]any{2, 4}}},
		{`def f($n): . + $n; f(1)`, 1, []any{2}},
		{`to_entries | map("\(.key)=\(.value)") | join(",")`, map[string]any{"a": 1}, []any{"a=1"}},
		{`1 + null`, nil, []any{1}},
	}
	for _, tc := range tests {
		e, err := Compile(tc.src, nil)
		if err != nil {
			t.Errorf("%s: %v", tc.src, err)
			continue
		}
		got, err := e.Run(ctxT, tc.in, limitsT(time.Second), nil)
		if err != nil {
			t.Errorf("%s: %v", tc.src, err)
			continue
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s = %v, want %v", tc.src, got, tc.want)
		}
	}
}

// BenchmarkEvaluateBombs reports, for each bomb that compiles, the time and
// bytes of one evaluation (go test -bench EvaluateBombs -benchmem).
func BenchmarkEvaluateBombs(b *testing.B) {
	in := Value(bombInput())
	for _, tc := range bombs {
		if tc.refused != "" {
			continue
		}
		b.Run(strings.ReplaceAll(tc.name, " ", "_"), func(b *testing.B) {
			e := compileT(b, tc.src)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.Run(ctxT, in, limitsT(time.Minute), nil); err == nil {
					b.Fatal("no error")
				}
			}
		})
	}
}

// TestPathExprBudget: a write-back path runs the guarded expression, so a
// select condition cannot escape the budget.
func TestPathExprBudget(t *testing.T) {
	e := compileT(t, `.spec.list[] | select(((.name // "x") * 1000000000) == "x") | .template`)
	if why := e.SimplePathReason(); why != "" {
		t.Fatalf("not writable: %s", why)
	}
	pe, err := e.PathExpr()
	if err != nil {
		t.Fatalf("not writable: %v", err)
	}
	_, err = pe.Run(ctxT, map[string]any{"spec": map[string]any{"list": []any{map[string]any{"name": "a"}}}}, limitsT(time.Minute), nil)
	if err == nil || !strings.Contains(err.Error(), "more than 64 MiB") {
		t.Fatalf("error = %v, want the byte budget", err)
	}
}

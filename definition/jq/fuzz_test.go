package jq

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzEvaluateGrowth grows jq expressions out of pieces that can blow up
// (nesting, pipe chains, + and * on strings, arrays and numbers,
// interpolation, tojson, add, join, split, reduce, user functions, limit,
// first) with sizes and counts from the fuzz bytes (see growthOps), and
// evaluates every one that compiles on a workload-sized input. Each
// evaluation must end by its step or byte budget, not by its deadline, and
// allocate at most MaxEvalBytes + 16 MiB: fuzz workers run one input at a
// time per process, so the process's allocation counter measures that one
// evaluation. The seeds are the bombs of bombs_test.go
// (TestGrowthSeedsAreTheBombs).
func FuzzEvaluateGrowth(f *testing.F) {
	for _, s := range growthSeeds {
		f.Add(s.ops)
	}
	// MUSTER_FUZZ_GROWTH_SKIP (op names, comma-separated) turns ops into
	// "." so that a long run can look past a finding already reported.
	saved := growthOps
	f.Cleanup(func() { growthOps = saved })
	for _, name := range strings.Split(os.Getenv("MUSTER_FUZZ_GROWTH_SKIP"), ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		i := slices.IndexFunc(growthOps, func(op growthOp) bool { return op.name == name })
		if i < 0 {
			f.Fatalf("MUSTER_FUZZ_GROWTH_SKIP: no op %q", name)
		}
		ops := slices.Clone(growthOps)
		ops[i] = growthLeaf(name, ".")
		growthOps = ops
	}
	in := Value(bombInput())
	// The deadline is a backstop only: the step and byte budgets must stop
	// every evaluation long before it.
	const deadline = 10 * time.Second
	f.Fuzz(func(t *testing.T, ops []byte) {
		src, ok := growthExpr(ops)
		if !ok {
			return // longer than an expression may be: refused unparsed
		}
		e, err := Compile(src, nil)
		if err != nil {
			if strings.Contains(err.Error(), "cannot be guarded") {
				t.Fatalf("%s: the checked expression breaks the rewrite: %v", src, err)
			}
			return
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		_, err = e.Run(ctxT, in, limitsT(deadline), nil)
		took := time.Since(start)
		runtime.ReadMemStats(&after)
		if err != nil && strings.Contains(err.Error(), "did not finish within") {
			t.Fatalf("%s: stopped by the %v deadline after %v, not by its step or byte budget", src, deadline, took)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > MaxEvalBytes+16<<20 {
			t.Fatalf("%s: allocated %d MiB in %v, want at most %d MiB (err: %v)", src, alloc>>20, took, (MaxEvalBytes+16<<20)>>20, err)
		}
	})
}

// growthOp is one piece of a grown expression: it pops arity operands (a is
// the top of the stack, b the one below; "." when the stack runs short),
// reads a count n from the fuzz bytes when it has one, and pushes what
// build makes of them; build says false when that is longer than an
// expression may be.
type growthOp struct {
	name  string
	arity int
	count bool
	build func(a, b string, n int) (string, bool)
}

func growthLeaf(name, src string) growthOp {
	return growthOp{name: name, build: func(_, _ string, _ int) (string, bool) { return src, true }}
}

func growthUnary(name, format string) growthOp {
	return growthOp{name: name, arity: 1, build: func(a, _ string, _ int) (string, bool) {
		return strings.ReplaceAll(format, "{a}", a), true
	}}
}

func growthBinary(name, format string) growthOp {
	return growthOp{name: name, arity: 2, build: func(a, b string, _ int) (string, bool) {
		return strings.NewReplacer("{a}", a, "{b}", b).Replace(format), true
	}}
}

// growthCounted is a growthOp whose count is a number in the expression.
func growthCounted(name string, arity int, format string) growthOp {
	return growthOp{name: name, arity: arity, count: true, build: func(a, b string, n int) (string, bool) {
		return strings.NewReplacer("{a}", a, "{b}", b, "{n}", strconv.Itoa(n)).Replace(format), true
	}}
}

// growthRepeating is a growthOp that repeats piece(a) n times, joined by sep,
// and wraps the result: wrap(joined, a, b).
func growthRepeating(name string, arity int, sep string, piece func(a string) string, wrap func(s, a, b string) string) growthOp {
	return growthOp{name: name, arity: arity, count: true, build: func(a, b string, n int) (string, bool) {
		p := piece(a)
		if n < 1 || n > MaxExpressionBytes || n*(len(p)+len(sep)) > MaxExpressionBytes+len(sep) {
			return "", false
		}
		return wrap(strings.TrimSuffix(strings.Repeat(p+sep, n), sep), a, b), true
	}}
}

// growthTimes repeats the op after it as often as its count says.
const growthTimes = "times"

// growthOps is the grammar of FuzzEvaluateGrowth: an op is chosen by one
// byte (modulo the table), its count, if it has one, by two more: m×10^e
// for bytes m and e (e modulo 13).
var growthOps = []growthOp{
	{name: growthTimes, count: true},
	// Values and input.
	growthLeaf("dot", "."), growthLeaf("x", `"x"`), growthLeaf("xx", `"xx"`), growthLeaf("empty string", `""`),
	growthLeaf("text", ".spec.text"), growthLeaf("list", ".spec.list"), growthLeaf("items", ".spec.list[]"),
	growthLeaf("$r.text", "$r.spec.text"), growthLeaf("$r.list", "$r.spec.list"), growthLeaf("$a", "$a"), growthLeaf("$b", "$b"),
	growthLeaf("true", "true"), growthLeaf("each", ".[]"), growthCounted("num", 0, "{n}"),
	// Calls of user functions, defined by the def ops.
	growthLeaf("f", "f"), growthLeaf("a", "a"), growthLeaf("b", "b"),
	// Builtins that build bigger values, or work per byte of their input.
	growthLeaf("length", "length"), growthLeaf("tojson", "tojson"), growthLeaf("tostring", "tostring"), growthLeaf("add", "add"),
	growthLeaf("join empty", `join("")`), growthLeaf("split empty", `split("")`), growthLeaf("fromjson", "fromjson"),
	growthLeaf("sort", "sort"), growthLeaf("reverse", "reverse"), growthLeaf("unique", "unique"), growthLeaf("flatten", "flatten"),
	growthLeaf("keys", "keys"), growthLeaf("to_entries", "to_entries"), growthLeaf("group_by", "group_by(.)"),
	growthLeaf("indices", `indices("q")`), growthLeaf("index", `index("z")`), growthLeaf("ascii_upcase", "ascii_upcase"),
	growthLeaf("first", "first"), growthLeaf("min", "min"), growthLeaf("tonumber", "tonumber"),
	// Refused: loops of jq's own, the location, the budget.
	growthLeaf("until", "until(. > 1e12; . + 1)"), growthLeaf("while", "while(true; . + 1)"),
	growthLeaf("loc", "$__loc__"), growthLeaf("budget", "$__muster_budget"),
	// Nesting and wrapping.
	growthUnary("paren", "({a})"), growthUnary("array", "[{a}]"), growthUnary("object", `{"k": {a}}`),
	growthUnary("first of", "first({a})"), growthUnary("error", "error({a})"), growthUnary("join", "join({a})"),
	growthUnary("split", "split({a})"), growthUnary("map", "map({a})"), growthUnary("select", "select({a})"),
	growthUnary("range", "range({a})"), growthUnary("repeat", "repeat({a})"), growthUnary("base64", "@base64 {a}"),
	growthUnary("bind $r", ". as $r | {a}"), growthUnary("bind budget", ". as $__muster_budget | {a}"),
	// A non-recursive function running its argument twice: nested, it
	// doubles the work at each level.
	growthUnary("twice", "def d(f): f | f; d({a})"),
	growthCounted("limit", 1, "limit({n}; {a})"), growthCounted("slice", 1, "{a}[:{n}]"),
	growthRepeating("interpolate", 1, "", func(a string) string { return `\(` + a + ")" }, func(s, _, _ string) string { return `"` + s + `"` }),
	growthRepeating("commas", 1, ", ", growthSame, func(s, _, _ string) string { return s }),
	growthRepeating("pipes", 1, " | ", growthSame, func(s, _, _ string) string { return s }),
	// Combining.
	growthBinary("pipe", "{b} | {a}"), growthBinary("comma", "{b}, {a}"), growthBinary("plus", "{b} + {a}"),
	growthBinary("multiply", "{b} * {a}"), growthBinary("divide", "{b} / {a}"), growthBinary("alternative", "{b} // {a}"),
	growthBinary("as $a", "{b} as $a | {a}"), growthBinary("as $b", "{b} as $b | {a}"),
	growthBinary("interpolate two", `"\({b})\({a})"`), growthBinary("if", "if {b} then {a} else . end"),
	growthBinary("try", "try {b} catch {a}"), growthBinary("limit by", "limit({b}; {a})"),
	growthBinary("def f", "def f: {b}; {a}"), growthBinary("def a", "def a: {b}; {a}"), growthBinary("def b", "def b: {b}; {a}"),
	// Iteration over n literal values, as reduceOver writes it.
	growthRepeating("reduce", 2, ",", growthOne, func(s, a, b string) string { return "reduce (" + s + ") as $x (" + b + "; " + a + ")" }),
	growthRepeating("foreach", 2, ",", growthOne, func(s, a, b string) string { return "foreach (" + s + ") as $x (" + b + "; " + a + ")" }),
}

func growthSame(a string) string { return a }
func growthOne(string) string    { return "1" }

// maxGrowthOps bounds the fuzz input; maxGrowthTimes the repetitions of one
// "times" op.
const (
	maxGrowthOps   = 4096
	maxGrowthTimes = 256
)

// growthExpr builds the expression ops describe: the pieces left on the
// stack, piped. ok is false when the pieces grow longer than an expression
// may be (Compile would refuse it before parsing).
func growthExpr(ops []byte) (src string, ok bool) {
	if len(ops) > maxGrowthOps {
		return "", false
	}
	var stack []string
	size := 0 // of the stack's pieces, piped
	pop := func() string {
		if len(stack) == 0 {
			return "."
		}
		s := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		size -= len(s) + len(" | ")
		return s
	}
	next := func() int {
		if len(ops) == 0 {
			return 0
		}
		b := ops[0]
		ops = ops[1:]
		return int(b)
	}
	count := func() int {
		m, e := next(), next()%13
		for range e {
			m *= 10
		}
		return m
	}
	for len(ops) > 0 {
		op := growthOps[next()%len(growthOps)]
		times := 1
		if op.name == growthTimes {
			times = min(count(), maxGrowthTimes)
			if op = growthOps[next()%len(growthOps)]; op.name == growthTimes {
				continue
			}
		}
		n := 0
		if op.count {
			n = count()
		}
		for range times {
			var a, b string
			switch op.arity {
			case 1:
				a = pop()
			case 2:
				a, b = pop(), pop()
			}
			s, ok := op.build(a, b, n)
			if size += len(s) + len(" | "); !ok || size > MaxExpressionBytes+len(" | ") {
				return "", false
			}
			stack = append(stack, s)
		}
	}
	if len(stack) == 0 {
		return ".", true
	}
	return strings.Join(stack, " | "), true
}

// growthProgram encodes a program for growthExpr: op names, each op with a
// count followed by the count (an int of the form m×10^e, m < 256).
func growthProgram(steps ...any) []byte {
	var out []byte
	for _, s := range steps {
		switch s := s.(type) {
		case string:
			i := slices.IndexFunc(growthOps, func(op growthOp) bool { return op.name == s })
			if i < 0 {
				panic("no growth op " + s)
			}
			out = append(out, byte(i))
		case int:
			m, e := s, 0
			for m > 255 && m%10 == 0 {
				m, e = m/10, e+1
			}
			if m > 255 {
				panic(fmt.Sprintf("count %d is not m×10^e with m < 256", s))
			}
			out = append(out, byte(m), byte(e))
		}
	}
	return out
}

// growthSeeds are FuzzEvaluateGrowth's seeds: each bomb of bombs_test.go
// (bomb names it), then shapes that grow in ways no bomb does.
var growthSeeds = []struct {
	bomb string
	ops  []byte
}{
	{"string repetition", growthProgram("x", "num", 1000000000, "multiply", "paren", "length", "pipe")},
	{"repetition of input", growthProgram("text", "num", 100, "multiply", "paren", "length", "pipe")},
	{"recursion into an array", growthProgram("f", "array", "f", "def f")},
	{"plain recursion", growthProgram("f", "f", "def f")},
	{"mutual recursion", growthProgram("b", "a", "array", "a", "def b", "def a")},
	{"huge error message", growthProgram("x", "num", 1000000, "multiply", "error")},
	{"range", growthProgram("num", 1000000000, "range", "array", "length", "pipe")},
	{"repeat", growthProgram("num", 1, "repeat", "limit", 1000000000, "array", "length", "pipe")},
	{"until", growthProgram("num", 0, "until", "pipe")},
	{"while", growthProgram("num", 0, "while", "pipe", "array", "length", "pipe")},
	{"doubling by reduce", growthProgram("xx", "dot", "dot", "plus", "reduce", 40)},
	{"doubling arrays", growthProgram("num", 1, "array", "dot", "dot", "plus", "reduce", 40)},
	{"squaring numbers", growthProgram("num", 3, "dot", "dot", "multiply", "reduce", 40)},
	{"nested tojson", growthProgram(append([]any{"text"}, slices.Repeat([]any{"tojson", "pipe"}, 30)...)...)},
	{"tojson of shared references", growthProgram("text", "commas", 20, "array", "tojson", "pipe", "length", "pipe")},
	{"join of shared references", growthProgram("items", "$r.text", "pipe", "array", "join empty", "pipe", "length", "pipe", "bind $r")},
	{"add of shared references", growthProgram("items", "$r.text", "pipe", "array", "add", "pipe", "length", "pipe", "bind $r")},
	{"join with a big separator", growthProgram("items", "tostring", "pipe", "array", "$r.text", "join", "pipe", "length", "pipe", "bind $r")},
	{"location", growthProgram("loc")},
	{"interpolation of input", growthProgram("dot", "interpolate", 12, "length", "pipe")},
	{"split to characters, many times", growthProgram("text", "split empty", "commas", 4, "pipe", "array", "length", "pipe")},
	{"quadratic iteration", growthProgram("items", "items", "$a", "as $b", "as $a", "array", "length", "pipe")},
	{"format string", growthProgram("text", "interpolate", 1, "base64")},
	{"reserved variable", growthProgram("num", 1, "bind budget")},
	{"the budget itself", growthProgram("budget")},
	// Deep nesting, as deep as an expression may nest.
	{"", growthProgram("text", "times", 60, "array", "times", 60, "paren")},
	{"", growthProgram("x", "times", 63, "object", "tojson", "pipe")},
	// A function that runs its argument twice, nested: 2^20 runs.
	{"", growthProgram("text", "tojson", "pipe", "times", 20, "twice")},
	// A long pipe chain of appends.
	{"", growthProgram("list", "dot", "dot", "plus", "pipes", 200, "pipe", "length", "pipe")},
	// Interpolation inside interpolation.
	{"", growthProgram("text", "times", 6, "interpolate", 2, "length", "pipe")},
	// Splitting and joining back, many times.
	{"", growthProgram("text", "split empty", "join empty", "pipe", "pipes", 30, "pipe")},
	// Collecting the first values of a product.
	{"", growthProgram("items", "items", "$r.text", "as $b", "as $a", "limit", 100000, "array", "add", "pipe", "bind $r")},
	{"", growthProgram("items", "items", "comma", "first of", "num", 7, "multiply")},
}

// bombsBeyondGrammar are bombs the fuzz grammar has no pieces for; they
// came from fuzz findings and by hand, and TestBombs and the crashers kept
// under testdata/fuzz/FuzzEvaluateGrowth cover them.
var bombsBeyondGrammar = map[string]bool{
	"fromjson of a built string":       true,
	"sorting copies":                   true,
	"indices of a big string":          true,
	"interpolation inside a generator": true,
	"error of shared references":       true,
}

// TestGrowthSeedsAreTheBombs: FuzzEvaluateGrowth starts from every bomb of
// bombs_test.go its grammar can build.
func TestGrowthSeedsAreTheBombs(t *testing.T) {
	seeds := map[string]string{}
	for _, s := range growthSeeds {
		src, ok := growthExpr(s.ops)
		if !ok {
			t.Errorf("seed %v (%q) is longer than an expression may be", s.ops, s.bomb)
			continue
		}
		if s.bomb != "" {
			seeds[s.bomb] = src
		}
	}
	for _, b := range bombs {
		if bombsBeyondGrammar[b.name] {
			continue
		}
		if got, ok := seeds[b.name]; !ok {
			t.Errorf("no seed for the bomb %q", b.name)
		} else if got != b.src {
			t.Errorf("the seed for %q builds\n%s\nwant\n%s", b.name, got, b.src)
		}
	}
}

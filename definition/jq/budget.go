package jq

import (
	"errors"
	"fmt"
	"math"
	"math/big"

	"github.com/itchyny/gojq"
)

// Every evaluation of a definition is bounded in time AND memory, whatever
// the expression does. A deadline alone is not enough: ("x" * 1000000000)
// allocates a gigabyte in one instruction, long before any clock is read.
// Four mechanisms together make the bound hold:
//
//  1. An allow-list of jq functions (allowedFuncs): no loops of jq's own
//     (range, repeat, while, until, recurse, walk), nothing that reaches
//     outside the document, no regular expressions, no @formats. Every
//     function the catalog and the upstream Workload Map catalog use is on
//     it.
//  2. No recursion: a function definition that calls itself, directly or
//     through others, is refused (def f: [f]; f grew 2 GB in seconds).
//     Without recursion and loops, only reduce and foreach iterate, over
//     generators that the step budget bounds.
//  3. A step budget: gojq asks the context's Done before every instruction,
//     and the evaluation stops after MaxEvalSteps of them; each step is also
//     charged stepBytes to the byte budget below, for what a plain
//     instruction allocates.
//  4. A byte budget on every construct that can make a value bigger than its
//     inputs: +, *, / and every string interpolation, and the functions of
//     growthFactor. Before the construct runs, a guard estimates what it will
//     build (a shared subvalue counted once per reference, so a list of a
//     thousand references to one big string is as big as its join) and
//     charges it to the evaluation; past MaxEvalBytes the evaluation fails.
//     The guards are inserted by rewriting the parsed expression (rewrite)
//     and read the evaluation's budget from a variable the user cannot name.
//
// Big integers are bounded too: a product of more than maxNumberBits bits
// fails (squaring a number thirty times would need 2^30 bits).
const (
	// MaxEvalSteps bounds the jq instructions of one evaluation. The
	// catalog's expressions take at most a few thousand.
	MaxEvalSteps = 500_000
	// MaxEvalBytes bounds what the growth constructs of one evaluation may
	// build, in bytes (estimated before they run).
	MaxEvalBytes = 64 << 20
	// maxNumberBits bounds an integer product.
	maxNumberBits = 4096
	// stepBytes is charged to the byte budget for every instruction: what
	// one instruction may allocate besides the guarded constructs (an
	// object of one key, a fork, a path element). The growth fuzzer's
	// worst case measured 86 bytes a step.
	stepBytes = 128
)

// Names the rewrite uses. The check (jqWalker) refuses user names that
// start with "$__" or "_", so a definition can neither read nor rebind them.
const (
	budgetVar  = "$__muster_budget"
	guardBinop = "_muster_binop" // _muster_binop($b; op; $l; $r): checks, returns .
	guardIn    = "_muster_in"    // _muster_in($b; factor): checks deepsize(.) × factor, returns .
	guardJoin  = "_muster_join"  // _muster_join($b; $sep): checks a join of . with $sep, returns .
	guardValue = "_muster_value" // _muster_value($b; $v; factor): checks deepsize($v) × factor, returns .
)

// growthFactor: functions whose output can be bigger than their input, and
// by how much at most per byte of deepsize(input). tojson escapes a
// control character as six bytes; split makes a string header and a slot
// per piece.
var growthFactor = map[string]int64{
	// The encoder escapes a control character as six bytes and grows its
	// buffer by doubling: twelve bytes a byte of input at worst.
	"tostring/0": 12, "tojson/0": 12, "error/1": 12,
	// fromjson: "[]," makes a slice and an interface, 48 bytes for three.
	"fromjson/0": 16,
	// Copies of an array or object, with a sort item per element.
	"add/0": 2, "flatten/0": 2, "flatten/1": 2, "reverse/0": 2,
	"sort/0": 4, "sort_by/1": 4, "group_by/1": 4, "unique/0": 4, "unique_by/1": 4,
	"min_by/1": 2, "max_by/1": 2, "keys/0": 2, "keys_unsorted/0": 2,
	"to_entries/0": 12, "from_entries/0": 4, "with_entries/1": 12,
	"ascii_downcase/0": 2, "ascii_upcase/0": 2,
	// split makes a string header and a slot per piece; indices, index
	// and rindex explode the string into runes and box each one (measured:
	// 93 bytes a byte of input).
	"split/1": 32, "indices/1": 96, "index/1": 96, "rindex/1": 96,
}

// budget is one evaluation's account; deadlineCtx carries it.
type budget struct {
	bytes int64
}

var (
	errSteps = fmt.Errorf("did more than %d steps; simplify the expression", MaxEvalSteps)
	errBytes = fmt.Errorf("would build more than %d MiB of values; simplify the expression", MaxEvalBytes>>20)
	errBits  = fmt.Errorf("a number would need more than %d bits", maxNumberBits)
)

func (b *budget) charge(n int64) error {
	if n < 0 || n > MaxEvalBytes || b.bytes+n > MaxEvalBytes {
		b.bytes = MaxEvalBytes + 1
		return errBytes
	}
	b.bytes += n
	return nil
}

// deepsize estimates the bytes of v, counting a shared subvalue once per
// reference. It stops counting past limit.
func deepsize(v any, limit int64) int64 {
	var n int64
	var walk func(v any)
	walk = func(v any) {
		if n > limit {
			return
		}
		switch v := v.(type) {
		case string:
			n += int64(len(v)) + 16
		case []any:
			n += 24 + 16*int64(len(v))
			for _, x := range v {
				walk(x)
			}
		case map[string]any:
			n += 48
			for k, x := range v {
				n += int64(len(k)) + 32
				walk(x)
			}
		case *big.Int:
			n += int64(v.BitLen()/8) + 16
		default:
			n += 16
		}
	}
	walk(v)
	return n
}

func budgetOf(v any) (*budget, error) {
	if d, ok := v.(*deadlineCtx); ok {
		return &d.budget, nil
	}
	return nil, errors.New("internal error: evaluation budget missing")
}

func bits(v any) int {
	switch v := v.(type) {
	case int:
		if v < 0 {
			v = -v
		}
		return 64 - leadingZeros(uint64(v))
	case *big.Int:
		return v.BitLen()
	case float64:
		return 64
	}
	return 0
}

func leadingZeros(x uint64) int {
	n := 0
	for i := 63; i >= 0 && x&(1<<uint(i)) == 0; i-- {
		n++
	}
	return n
}

// binopGuard runs before every +, * and / of a definition.
func binopGuard(_ any, args []any) any {
	b, err := budgetOf(args[0])
	if err != nil {
		return err
	}
	op, l, r := args[1], args[2], args[3]
	var n int64
	switch op {
	case "+":
		switch l := l.(type) {
		case string:
			if r, ok := r.(string); ok {
				n = int64(len(l) + len(r))
			}
		case []any:
			if r, ok := r.([]any); ok {
				n = 16 * int64(len(l)+len(r))
			}
		case map[string]any:
			if r, ok := r.(map[string]any); ok {
				n = 48 * int64(len(l)+len(r))
			}
		case *big.Int:
			if bits(l)+1 > maxNumberBits || bits(r)+1 > maxNumberBits {
				return errBits
			}
		}
	case "*":
		if s, ok := l.(string); ok {
			n = repeatSize(s, r)
		} else if s, ok := r.(string); ok {
			n = repeatSize(s, l)
		} else if lm, ok := l.(map[string]any); ok {
			n = deepsize(lm, MaxEvalBytes) + deepsize(r, MaxEvalBytes)
		} else if isInt(l) && isInt(r) && bits(l)+bits(r) > maxNumberBits {
			return errBits
		}
	case "/":
		if s, ok := l.(string); ok {
			if _, ok := r.(string); ok {
				n = 32 * int64(len(s)+1)
			}
		}
	}
	if err := b.charge(n); err != nil {
		return err
	}
	return args[2] // any value: the caller pipes on to the real operator
}

func isInt(v any) bool {
	switch v.(type) {
	case int, *big.Int:
		return true
	}
	return false
}

// repeatSize is the size of string s repeated count times, or more than the
// budget when the count is huge or not a number gojq repeats by.
func repeatSize(s string, count any) int64 {
	var c float64
	switch n := count.(type) {
	case int:
		c = float64(n)
	case float64:
		c = n
	case *big.Int:
		c = math.Inf(1)
	default:
		return 0 // not a repetition: gojq reports the type error itself
	}
	if math.IsNaN(c) || c <= 0 {
		return 0
	}
	size := float64(len(s)+1) * math.Ceil(c)
	if size > MaxEvalBytes {
		return MaxEvalBytes + 1
	}
	return int64(size)
}

// inGuard runs before every growth function and string interpolation.
func inGuard(v any, args []any) any {
	b, err := budgetOf(args[0])
	if err != nil {
		return err
	}
	factor, _ := args[1].(int)
	if err := b.charge(scaled(deepsize(v, MaxEvalBytes), factor)); err != nil {
		return err
	}
	return v
}

// valueGuard runs before a function whose cost grows with an argument.
func valueGuard(v any, args []any) any {
	b, err := budgetOf(args[0])
	if err != nil {
		return err
	}
	factor, _ := args[2].(int)
	if err := b.charge(scaled(deepsize(args[1], MaxEvalBytes), factor)); err != nil {
		return err
	}
	return v
}

// scaled is size × factor, saturating past the budget.
func scaled(size int64, factor int) int64 {
	if factor > 0 && size > MaxEvalBytes/int64(factor) {
		return MaxEvalBytes + 1
	}
	return size * int64(factor)
}

// joinGuard runs before every join.
func joinGuard(v any, args []any) any {
	b, err := budgetOf(args[0])
	if err != nil {
		return err
	}
	n := deepsize(v, MaxEvalBytes)
	if a, ok := v.([]any); ok {
		if s, ok := args[1].(string); ok {
			n += int64(len(a)) * int64(len(s))
		}
	}
	if err := b.charge(n); err != nil {
		return err
	}
	return v
}

// compilerOptions declares what the rewritten expressions use.
var compilerOptions = []gojq.CompilerOption{
	gojq.WithVariables([]string{budgetVar}),
	gojq.WithFunction(guardBinop, 4, 4, binopGuard),
	gojq.WithFunction(guardIn, 2, 2, inGuard),
	gojq.WithFunction(guardJoin, 2, 2, joinGuard),
	gojq.WithFunction(guardValue, 3, 3, valueGuard),
	gojq.WithFunction(guardVar, 2, 2, varGuard),
}

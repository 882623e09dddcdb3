package definition

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"sort"
	"strings"

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

// allowedFuncs are the jq builtins (name/arity) a definition may call.
var allowedFuncs = func() map[string]bool {
	m := map[string]bool{}
	for _, f := range strings.Fields(`
		empty/0 error/0 error/1 not/0 length/0 utf8bytelength/0 type/0
		keys/0 keys_unsorted/0 values/0 has/1 in/1 contains/1 inside/1 getpath/1 path/1
		select/1 map/1 map_values/1 to_entries/0 from_entries/0 with_entries/1
		add/0 any/0 any/1 any/2 all/0 all/1 all/2 isempty/1
		first/0 first/1 last/0 last/1 nth/1 nth/2 limit/2
		flatten/0 flatten/1 reverse/0 sort/0 sort_by/1 group_by/1 unique/0 unique_by/1
		min/0 max/0 min_by/1 max_by/1 index/1 rindex/1 indices/1
		floor/0 ceil/0 round/0 sqrt/0 fabs/0 abs/0 infinite/0 nan/0 isinfinite/0 isnan/0 isnormal/0
		tostring/0 tonumber/0 tojson/0 fromjson/0 toarray/0
		startswith/1 endswith/1 ltrimstr/1 rtrimstr/1 ascii_downcase/0 ascii_upcase/0 split/1 join/1
		objects/0 arrays/0 strings/0 numbers/0 booleans/0 nulls/0 iterables/0 scalars/0
		`) {
		m[f] = true
	}
	return m
}()

// allowedList is allowedFuncs sorted, for suggestions.
var allowedList = func() []string {
	l := make([]string, 0, len(allowedFuncs))
	for f := range allowedFuncs {
		l = append(l, f)
	}
	sort.Strings(l)
	return l
}()

// jqBuiltins are the functions gojq defines (name/arity), asked from gojq
// itself, so that an unknown name reads "function not defined" and a known
// one outside allowedFuncs reads "not allowed".
var jqBuiltins = func() map[string]bool {
	m := map[string]bool{}
	q, err := gojq.Parse("builtins")
	if err != nil {
		panic(err)
	}
	iter := q.Run(nil)
	for {
		v, ok := iter.Next()
		if !ok {
			return m
		}
		list, ok := v.([]any)
		if !ok {
			panic(fmt.Sprintf("gojq builtins: %v", v))
		}
		for _, f := range list {
			if s, ok := f.(string); ok {
				m[s] = true
			}
		}
	}
}()

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
	gojq.WithFunction(guardRef, 2, 2, refGuard),
}

// rewrite returns q with a guard before every growth construct. q must have
// passed checkQuery. It works on source text: each guarded node is printed,
// wrapped and parsed again, which keeps the rewrite independent of how gojq
// represents variable bindings; expressions are at most MaxExpressionBytes.
func rewrite(q *gojq.Query) (*gojq.Query, error) {
	r := &rewriter{}
	r.visitor().walk(q)
	if r.err != nil {
		return nil, r.err
	}
	return q, nil
}

type rewriter struct{ err error }

func (r *rewriter) parse(src string) *gojq.Query {
	q, err := gojq.Parse(src)
	if err != nil && r.err == nil {
		r.err = fmt.Errorf("internal error: guarding %q: %w", src, err)
	}
	return q
}

// visitor guards nodes after their children, so that the text printed for
// a node already holds its children's guards.
func (r *rewriter) visitor() *jqVisitor {
	return &jqVisitor{query: r.binop, term: r.term, pattern: r.patternKeys}
}

// binop guards +, * and /.
func (r *rewriter) binop(q *gojq.Query) {
	var op string
	switch q.Op {
	case gojq.OpAdd:
		op = "+"
	case gojq.OpMul:
		op = "*"
	case gojq.OpDiv:
		op = "/"
	default:
		return
	}
	// jq evaluates the right operand in the outer loop: (1,2) + (10,20)
	// is 11, 12, 21, 22. The bindings keep that order.
	src := fmt.Sprintf("(%s) as $__muster_r | (%s) as $__muster_l | %s(%s; %q; $__muster_l; $__muster_r) | $__muster_l %s $__muster_r",
		q.Right, q.Left, guardBinop, budgetVar, op, op)
	if nq := r.parse(src); nq != nil {
		*q = gojq.Query{FuncDefs: q.FuncDefs, Term: &gojq.Term{Type: gojq.TermTypeQuery, Query: nq}}
	}
}

// interpolated reports whether s holds interpolations.
func interpolated(s *gojq.String) bool { return s != nil && len(s.Queries) > 0 }

// interpolation returns an interpolated string as the guarded expression it
// stands for: each part turned into text as gojq does (tostring), joined by
// guarded +. gojq would otherwise join the parts with its own +, out of the
// guards' sight: "\(.list[])\(.big)" copies the big part once for every
// value of the list.
func (r *rewriter) interpolation(s *gojq.String) *gojq.Query {
	acc := ""
	for _, q := range s.Queries {
		part := q.String() // a literal part prints as a string literal
		if q.Term == nil || q.Term.Type != gojq.TermTypeString || interpolated(q.Term.Str) || q.Op != 0 {
			part = fmt.Sprintf("((%s) | %s(%s; %d) | tostring)", q, guardIn, budgetVar, growthFactor["tostring/0"])
		}
		if acc == "" {
			acc = part
			continue
		}
		// As gojq's own chain: the new part is the right operand, which jq
		// evaluates in the outer loop.
		acc = fmt.Sprintf("((%s) as $__muster_r | (%s) as $__muster_l | %s(%s; \"+\"; $__muster_l; $__muster_r) | $__muster_l + $__muster_r)",
			part, acc, guardBinop, budgetVar)
	}
	if acc == "" {
		acc = `""`
	}
	return r.parse(acc)
}

// term guards growth functions and interpolated strings, wherever a string
// may be interpolated: a term, an object key, an index.
func (r *rewriter) term(t *gojq.Term) {
	r.growth(t)
	switch t.Type {
	case gojq.TermTypeString:
		if interpolated(t.Str) {
			if nq := r.interpolation(t.Str); nq != nil {
				t.Type, t.Str, t.Query = gojq.TermTypeQuery, nil, nq
			}
		}
	case gojq.TermTypeObject:
		for _, kv := range t.Object.KeyVals {
			if interpolated(kv.KeyString) {
				if nq := r.interpolation(kv.KeyString); nq != nil {
					kv.KeyString, kv.KeyQuery = nil, nq
				}
			}
		}
	case gojq.TermTypeIndex:
		r.index(t.Index)
	}
	for _, s := range t.SuffixList {
		r.index(s.Index)
	}
}

func (r *rewriter) index(x *gojq.Index) {
	if x != nil && interpolated(x.Str) {
		if nq := r.interpolation(x.Str); nq != nil {
			x.Str, x.Start = nil, nq
		}
	}
}

func (r *rewriter) patternKeys(p *gojq.Pattern) {
	for _, o := range p.Object {
		if interpolated(o.KeyString) {
			if nq := r.interpolation(o.KeyString); nq != nil {
				o.KeyString, o.KeyQuery = nil, nq
			}
		}
	}
}

// growth guards the functions that can build values bigger than their
// input.
func (r *rewriter) growth(t *gojq.Term) {
	if t.Type != gojq.TermTypeFunc {
		return
	}
	key := funcKey(t.Func.Name, len(t.Func.Args))
	var src string
	switch {
	case key == "join/1":
		src = fmt.Sprintf("(%s) as $__muster_sep | %s(%s; $__muster_sep) | join($__muster_sep)", t.Func.Args[0], guardJoin, budgetVar)
	case key == "error/1":
		// The message is the argument; gojq encodes it whole to print it.
		src = fmt.Sprintf("(%s) as $__muster_msg | %s(%s; $__muster_msg; %d) | error($__muster_msg)", t.Func.Args[0], guardValue, budgetVar, growthFactor[key])
	case growthFactor[key] > 0:
		src = fmt.Sprintf("%s(%s; %d) | %s", guardIn, budgetVar, growthFactor[key], t.Func)
	default:
		return
	}
	if nq := r.parse(src); nq != nil {
		t.Type, t.Func, t.Query = gojq.TermTypeQuery, nil, nq
	}
}

// recursion returns the name of a function definition of q that calls
// itself, directly or through other definitions, or "". Functions are
// matched by name and arity, ignoring scope: a definition that shadows
// another of the same name and arity may be refused although it does not
// recurse, which a definition never needs.
func recursion(q *gojq.Query) string {
	calls := map[string]map[string]bool{} // def → names it calls
	var defs []string
	(&jqVisitor{query: func(q *gojq.Query) {
		for _, fd := range q.FuncDefs {
			key := funcKey(fd.Name, len(fd.Args))
			if calls[key] == nil {
				calls[key] = map[string]bool{}
				defs = append(defs, key)
			}
			into := calls[key]
			(&jqVisitor{term: func(t *gojq.Term) {
				if t.Type == gojq.TermTypeFunc {
					into[funcKey(t.Func.Name, len(t.Func.Args))] = true
				}
			}}).walk(fd.Body)
		}
	}}).walk(q)
	sort.Strings(defs)
	// Depth-first search for a cycle.
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var cyc string
	var dfs func(k string) bool
	dfs = func(k string) bool {
		color[k] = grey
		for c := range calls[k] {
			if _, isDef := calls[c]; !isDef {
				continue
			}
			switch color[c] {
			case grey:
				cyc = c
				return true
			case white:
				if dfs(c) {
					return true
				}
			}
		}
		color[k] = black
		return false
	}
	for _, d := range defs {
		if color[d] == white && dfs(d) {
			return cyc
		}
	}
	return ""
}

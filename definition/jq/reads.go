package jq

import (
	"fmt"
	"slices"

	"github.com/itchyny/gojq"
)

// A caller that converts its input into the value form for every run (a
// pod, for the pod-grouping question) can convert only what the
// expressions may read: Reads works that out from their syntax, and counts
// anything it does not understand as reading the whole input.

// maxReadDepth is how deep Reads tracks paths: .metadata.labels is
// tracked, .metadata.labels.app is counted as .metadata.labels.
const maxReadDepth = 2

// Reads is the set of subtrees of their input that expressions can
// observe. A path means the whole value at that path is needed; a path's
// parents are only indexed by the keys listed. The zero Reads is empty.
type Reads struct {
	// All means the whole input.
	All bool
	// Paths maps a top-level key to the second-level keys read below it;
	// nil means the whole top-level value.
	Paths map[string]map[string]bool
}

func (n *Reads) need(p []string) {
	if n.All {
		return
	}
	if len(p) == 0 {
		n.All = true
		n.Paths = nil
		return
	}
	if n.Paths == nil {
		n.Paths = map[string]map[string]bool{}
	}
	sub, seen := n.Paths[p[0]]
	switch {
	case seen && sub == nil: // already whole
	case len(p) == 1:
		n.Paths[p[0]] = nil
	default:
		if sub == nil {
			sub = map[string]bool{}
			n.Paths[p[0]] = sub
		}
		sub[p[1]] = true
	}
}

// String is for tests and messages: "all", or the paths sorted.
func (n *Reads) String() string {
	if n.All {
		return "all"
	}
	var out []string
	for k, sub := range n.Paths {
		if sub == nil {
			out = append(out, "."+k)
			continue
		}
		for s := range sub {
			out = append(out, "."+k+"."+s)
		}
	}
	slices.Sort(out)
	return fmt.Sprint(out)
}

// Add adds what e can observe of its input; a nil e reads nothing.
func (n *Reads) Add(e *Expr) {
	if e == nil || n.All {
		return
	}
	a := &needsWalker{n: n}
	a.consume(a.query(e.query, rootVal()))
}

// val is what an expression yields, as far as the analysis knows: a value
// at a known path of the input (tracked), or anything else (a new value or a
// part of the input whose path is already counted as needed).
type val struct {
	tracked bool
	path    []string
}

func rootVal() val { return val{tracked: true} }

var untracked = val{}

// needsWalker is a conservative analysis of a gojq AST. The invariant: a
// tracked value has not been read yet beyond indexing it by constant keys;
// anything else done with it (compare, iterate, pass to a function, return
// it) "consumes" it, which records its path as needed. What reads an
// untracked value cannot reach the input beyond what is already needed, since
// jq has no way up from a value to its parent and variables only ever hold
// untracked values (a tracked value bound to a variable is consumed).
// Function definitions could shadow builtins and rebind ., so any makes the
// whole input needed.
type needsWalker struct{ n *Reads }

func (a *needsWalker) consume(v val) {
	if v.tracked {
		a.n.need(v.path)
	}
}

// merge is the value of an expression that yields a or b.
func (a *needsWalker) merge(x, y val) val {
	if x.tracked && y.tracked && equalPath(x.path, y.path) {
		return x
	}
	a.consume(x)
	a.consume(y)
	return untracked
}

func equalPath(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (a *needsWalker) query(q *gojq.Query, in val) val {
	if q == nil {
		return in // an absent query is identity here (if without else)
	}
	if len(q.FuncDefs) > 0 || q.Meta != nil || len(q.Imports) > 0 {
		a.n.need(nil)
		return untracked
	}
	if q.Term != nil {
		return a.term(q.Term, in)
	}
	switch q.Op {
	case gojq.OpPipe:
		l := a.query(q.Left, in)
		if len(q.Patterns) > 0 {
			// Left as $x | Right: the variable holds left's value and
			// Right runs on the same input.
			a.consume(l)
			return a.query(q.Right, in)
		}
		return a.query(q.Right, l)
	case gojq.OpComma, gojq.OpAlt:
		return a.merge(a.query(q.Left, in), a.query(q.Right, in))
	case gojq.OpAdd, gojq.OpSub, gojq.OpMul, gojq.OpDiv, gojq.OpMod,
		gojq.OpEq, gojq.OpNe, gojq.OpGt, gojq.OpLt, gojq.OpGe, gojq.OpLe,
		gojq.OpAnd, gojq.OpOr:
		a.consume(a.query(q.Left, in))
		a.consume(a.query(q.Right, in))
		return untracked
	}
	a.n.need(nil)
	return untracked
}

func (a *needsWalker) consumeQuery(q *gojq.Query, in val) {
	if q != nil {
		a.consume(a.query(q, in))
	}
}

func (a *needsWalker) str(s *gojq.String, in val) {
	if s != nil {
		for _, q := range s.Queries {
			a.consumeQuery(q, in)
		}
	}
}

func (a *needsWalker) term(t *gojq.Term, in val) val {
	var out val
	switch t.Type {
	case gojq.TermTypeIdentity:
		out = in
	case gojq.TermTypeNull, gojq.TermTypeTrue, gojq.TermTypeFalse, gojq.TermTypeNumber, gojq.TermTypeBreak:
		out = untracked
	case gojq.TermTypeIndex:
		out = a.index(t.Index, in, in)
	case gojq.TermTypeFunc:
		out = a.fn(t.Func, in)
	case gojq.TermTypeObject:
		for _, kv := range t.Object.KeyVals {
			a.str(kv.KeyString, in)
			a.consumeQuery(kv.KeyQuery, in)
			switch {
			case kv.Val != nil:
				a.consumeQuery(kv.Val, in)
			case kv.KeyString != nil || kv.KeyQuery != nil:
				a.consume(in) // {"\(k)"} reads .[k]
			case len(kv.Key) > 0 && kv.Key[0] == '$':
				// {$x}: a variable, untracked.
			default:
				a.consume(a.key(in, kv.Key)) // {a} is {a: .a}
			}
		}
		out = untracked
	case gojq.TermTypeArray:
		a.consumeQuery(t.Array.Query, in)
		out = untracked
	case gojq.TermTypeUnary:
		a.consume(a.term(t.Unary.Term, in))
		out = untracked
	case gojq.TermTypeFormat:
		a.consume(in) // @base64 and friends format their input
		a.str(t.Str, in)
		out = untracked
	case gojq.TermTypeString:
		a.str(t.Str, in)
		out = untracked
	case gojq.TermTypeIf:
		a.consumeQuery(t.If.Cond, in)
		out = a.query(t.If.Then, in)
		for _, e := range t.If.Elif {
			a.consumeQuery(e.Cond, in)
			out = a.merge(out, a.query(e.Then, in))
		}
		out = a.merge(out, a.query(t.If.Else, in)) // no else: identity
	case gojq.TermTypeTry:
		out = a.query(t.Try.Body, in)
		if t.Try.Catch != nil {
			// The catch body runs on the error value.
			out = a.merge(out, a.query(t.Try.Catch, untracked))
		}
	case gojq.TermTypeReduce:
		a.consumeQuery(t.Reduce.Query, in)
		a.consumeQuery(t.Reduce.Start, in)
		// The update runs on the accumulator, which starts as the
		// (consumed) start value.
		a.consumeQuery(t.Reduce.Update, untracked)
		out = untracked
	case gojq.TermTypeForeach:
		a.consumeQuery(t.Foreach.Query, in)
		a.consumeQuery(t.Foreach.Start, in)
		a.consumeQuery(t.Foreach.Update, untracked)
		a.consumeQuery(t.Foreach.Extract, untracked)
		out = untracked
	case gojq.TermTypeLabel:
		out = a.query(t.Label.Body, in)
	case gojq.TermTypeQuery:
		out = a.query(t.Query, in)
	default: // recursion and anything new
		a.n.need(nil)
		return untracked
	}
	for _, s := range t.SuffixList {
		switch {
		case s.Index != nil:
			// Index expressions run on the term's input: .a[.b] reads .b.
			out = a.index(s.Index, out, in)
		case s.Iter:
			a.consume(out)
			out = untracked
		}
	}
	return out
}

// index applies x to v; queries inside x run on in.
func (a *needsWalker) index(x *gojq.Index, v, in val) val {
	if k, ok := constKey(x); ok {
		return a.key(v, k)
	}
	a.str(x.Str, in)
	a.consumeQuery(x.Start, in)
	a.consumeQuery(x.End, in)
	a.consume(v)
	return untracked
}

// key indexes v by a constant key.
func (a *needsWalker) key(v val, k string) val {
	if !v.tracked {
		return untracked
	}
	if len(v.path) >= maxReadDepth {
		a.consume(v)
		return untracked
	}
	return val{tracked: true, path: append(v.path[:len(v.path):len(v.path)], k)}
}

func (a *needsWalker) fn(f *gojq.Func, in val) val {
	switch {
	case len(f.Name) > 0 && f.Name[0] == '$':
		return untracked // variables only hold untracked values
	case f.Name == "empty" && len(f.Args) == 0:
		return untracked
	case f.Name == "select" && len(f.Args) == 1:
		a.consumeQuery(f.Args[0], in)
		return in
	case (f.Name == "first" || f.Name == "last") && len(f.Args) == 1:
		return a.query(f.Args[0], in)
	}
	// Any other function may read all of its input; its arguments run on
	// the input or on parts of it, so analysing them on the input covers
	// both.
	a.consume(in)
	for _, q := range f.Args {
		a.consumeQuery(q, in)
	}
	return untracked
}

package jq

import (
	"fmt"

	"github.com/itchyny/gojq"
)

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

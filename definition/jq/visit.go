package jq

import (
	"strconv"

	"github.com/itchyny/gojq"
)

// jqVisitor walks every node of a parsed jq expression — function bodies,
// object keys and values, string interpolations, indexes and slices,
// try/catch, reduce/foreach, if/elif, patterns — and calls its callbacks
// after a node's children (post-order), so that a callback may rewrite a
// node from its children as they already are. A nil callback is skipped.
// The checks (checkQuery), the guard rewrite (rewrite) and the recursion
// check (recursion) all walk with it, so none can miss a place the others
// see.
type jqVisitor struct {
	query   func(*gojq.Query)
	term    func(*gojq.Term)
	pattern func(*gojq.Pattern)
	str     func(*gojq.String)
}

// funcKey names a jq function as jq does: name/arity.
func funcKey(name string, arity int) string { return name + "/" + strconv.Itoa(arity) }

func (v *jqVisitor) walk(q *gojq.Query) {
	if q == nil {
		return
	}
	for _, fd := range q.FuncDefs {
		v.walk(fd.Body)
	}
	v.walkTerm(q.Term)
	v.walk(q.Left)
	v.walk(q.Right)
	for _, p := range q.Patterns {
		v.walkPattern(p)
	}
	if v.query != nil {
		v.query(q)
	}
}

func (v *jqVisitor) walkPattern(p *gojq.Pattern) {
	if p == nil {
		return
	}
	for _, e := range p.Array {
		v.walkPattern(e)
	}
	for _, o := range p.Object {
		v.walkStr(o.KeyString)
		v.walk(o.KeyQuery)
		v.walkPattern(o.Val)
	}
	if v.pattern != nil {
		v.pattern(p)
	}
}

func (v *jqVisitor) walkStr(s *gojq.String) {
	if s == nil {
		return
	}
	for _, q := range s.Queries {
		v.walk(q)
	}
	if v.str != nil && len(s.Queries) > 0 {
		v.str(s)
	}
}

func (v *jqVisitor) walkIndex(x *gojq.Index) {
	if x == nil {
		return
	}
	v.walkStr(x.Str)
	v.walk(x.Start)
	v.walk(x.End)
}

func (v *jqVisitor) walkTerm(t *gojq.Term) {
	if t == nil {
		return
	}
	switch t.Type {
	case gojq.TermTypeFunc:
		for _, a := range t.Func.Args {
			v.walk(a)
		}
	case gojq.TermTypeIndex:
		v.walkIndex(t.Index)
	case gojq.TermTypeObject:
		for _, kv := range t.Object.KeyVals {
			v.walkStr(kv.KeyString)
			v.walk(kv.KeyQuery)
			v.walk(kv.Val)
		}
	case gojq.TermTypeArray:
		v.walk(t.Array.Query)
	case gojq.TermTypeUnary:
		v.walkTerm(t.Unary.Term)
	case gojq.TermTypeFormat, gojq.TermTypeString:
		v.walkStr(t.Str)
	case gojq.TermTypeIf:
		v.walk(t.If.Cond)
		v.walk(t.If.Then)
		for _, e := range t.If.Elif {
			v.walk(e.Cond)
			v.walk(e.Then)
		}
		v.walk(t.If.Else)
	case gojq.TermTypeTry:
		v.walk(t.Try.Body)
		v.walk(t.Try.Catch)
	case gojq.TermTypeReduce:
		v.walkLoop(t.Reduce.Query, t.Reduce.Patterns, t.Reduce.Start, t.Reduce.Update, nil)
	case gojq.TermTypeForeach:
		v.walkLoop(t.Foreach.Query, t.Foreach.Patterns, t.Foreach.Start, t.Foreach.Update, t.Foreach.Extract)
	case gojq.TermTypeLabel:
		v.walk(t.Label.Body)
	case gojq.TermTypeQuery:
		v.walk(t.Query)
	}
	for _, s := range t.SuffixList {
		v.walkIndex(s.Index)
	}
	if v.term != nil {
		v.term(t)
	}
}

// walkLoop walks reduce (extract nil) and foreach.
func (v *jqVisitor) walkLoop(src *gojq.Query, patterns []*gojq.Pattern, start, update, extract *gojq.Query) {
	v.walk(src)
	for _, p := range patterns {
		v.walkPattern(p)
	}
	v.walk(start)
	v.walk(update)
	v.walk(extract)
}

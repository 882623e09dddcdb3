package jq

import "github.com/itchyny/gojq"

// constPath returns the keys of q when q is a path of constant object keys
// and nothing else.
func constPath(q *gojq.Query) ([]string, bool) {
	if q == nil || q.Term == nil || q.Op != 0 || len(q.FuncDefs) > 0 || q.Meta != nil || len(q.Imports) > 0 {
		return nil, false
	}
	t := q.Term
	keys := []string{}
	switch t.Type {
	case gojq.TermTypeIdentity:
	case gojq.TermTypeIndex:
		k, ok := constKey(t.Index)
		if !ok {
			return nil, false
		}
		keys = append(keys, k)
	case gojq.TermTypeQuery:
		return constPathSuffixes(constPath(t.Query))(t.SuffixList)
	default:
		return nil, false
	}
	return constPathSuffixes(keys, true)(t.SuffixList)
}

func constPathSuffixes(keys []string, ok bool) func([]*gojq.Suffix) ([]string, bool) {
	return func(sl []*gojq.Suffix) ([]string, bool) {
		if !ok {
			return nil, false
		}
		for _, s := range sl {
			if s.Index == nil || s.Iter || s.Optional {
				return nil, false
			}
			k, ok := constKey(s.Index)
			if !ok {
				return nil, false
			}
			keys = append(keys, k)
		}
		return keys, true
	}
}

// constKey is the key of .name, ."name" and .["name"].
func constKey(x *gojq.Index) (string, bool) {
	switch {
	case x.IsSlice || x.End != nil:
		return "", false
	case x.Name != "":
		return x.Name, true
	case x.Str != nil:
		return x.Str.Str, len(x.Str.Queries) == 0
	case x.Start != nil:
		q := x.Start
		if q.Term != nil && q.Term.Type == gojq.TermTypeString && len(q.Term.SuffixList) == 0 && len(q.FuncDefs) == 0 &&
			q.Term.Str != nil && len(q.Term.Str.Queries) == 0 {
			return q.Term.Str.Str, true
		}
	}
	return "", false
}

// SimplePathReason says why e cannot be written through, or "" when it is
// a simple path: field and index access, iteration, pipes, commas, select
// and the alternative operator. ".a // .b" picks its path by value, the
// same way an operator picks the template it uses (a leader/worker set's
// leaderTemplate falls back to its workerTemplate), so writing through the
// chosen path writes the template the pods are made from. Anything that
// computes a value (arithmetic, to_entries, map, user functions) has no
// path to write.
func (e *Expr) SimplePathReason() string { return simplePathReason(e.query) }

func simplePathReason(q *gojq.Query) string {
	if q == nil {
		return ""
	}
	if len(q.FuncDefs) > 0 {
		return "function definitions"
	}
	switch q.Op {
	case 0, gojq.OpPipe, gojq.OpComma, gojq.OpAlt:
	default:
		return "the operator " + q.Op.String()
	}
	if q.Term != nil {
		t := q.Term
		switch t.Type {
		case gojq.TermTypeIdentity, gojq.TermTypeIndex:
		case gojq.TermTypeQuery:
			if r := simplePathReason(t.Query); r != "" {
				return r
			}
		case gojq.TermTypeFunc:
			switch t.Func.Name {
			case "select", "empty", "getpath":
			case "first", "last":
				for _, a := range t.Func.Args {
					if r := simplePathReason(a); r != "" {
						return r
					}
				}
			default:
				return "the function " + t.Func.Name
			}
		default:
			return "the term " + t.String()
		}
	}
	if r := simplePathReason(q.Left); r != "" {
		return r
	}
	return simplePathReason(q.Right)
}

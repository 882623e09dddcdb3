package jq

import (
	"fmt"
	"sort"
	"strings"

	"github.com/itchyny/gojq"

	"github.com/muster-io/muster/internal/closest"
)

// bannedFuncs are the jq functions a definition may not call, with why. The
// walk checks names, not arities: a user function that shadows one of these
// names is rejected too, which is simpler to explain than scoping rules.
var bannedFuncs = map[string]string{
	"del":            "del modifies the document; paths must only read",
	"setpath":        "setpath modifies the document; paths must only read (getpath is fine)",
	"delpaths":       "delpaths modifies the document; paths must only read",
	"recurse":        "recurse walks the whole document and can run unbounded; name the fields to read",
	"walk":           "walk rewrites the whole document; name the fields to read",
	"range":          "range can generate unbounded output",
	"repeat":         "repeat never ends by itself",
	"paths":          "paths walks the whole document; name the fields to read",
	"leaf_paths":     "leaf_paths walks the whole document; name the fields to read",
	"env":            "env reaches outside the document",
	"$ENV":           "$ENV reaches outside the document",
	"input":          "input reaches outside the document",
	"inputs":         "inputs reaches outside the document",
	"input_filename": "input_filename reaches outside the document",
	"debug":          "debug writes outside the document",
	"stderr":         "stderr writes outside the document",
	"halt":           "halt stops the evaluator",
	"halt_error":     "halt_error stops the evaluator",
	"$__loc__":       "$__loc__ reaches outside the document",
	"$__prog_args":   "$__prog_args reaches outside the document",
	"modulemeta":     "modulemeta reaches outside the document",
	"input_line_number": "input_line_number reaches outside the " +
		"document",
}

// checkQuery returns why q is not allowed in a definition, or "" when it
// is. It looks at every node (jqVisitor): modules, assignments, banned and
// unknown functions, formats, recursive descent, reserved variable names,
// then recursion between the functions q defines.
func checkQuery(q *gojq.Query) string {
	w := &jqWalker{userFuncs: map[string]bool{}}
	(&jqVisitor{query: func(q *gojq.Query) {
		for _, fd := range q.FuncDefs {
			w.userFuncs[funcKey(fd.Name, len(fd.Args))] = true
			for _, a := range fd.Args {
				// A closure parameter f is a function f/0; a value
				// parameter $x is the variable $x and the function x/0.
				w.userFuncs[funcKey(strings.TrimPrefix(a, "$"), 0)] = true
			}
		}
	}}).walk(q)
	(&jqVisitor{query: w.query, term: w.term, pattern: w.pattern}).walk(q)
	if w.reason == "" {
		if f := recursion(q); f != "" {
			w.fail("the function %s calls itself (directly or through others); recursion is not allowed in a path, so that every evaluation ends", f)
		}
	}
	return w.reason
}

type jqWalker struct {
	reason string
	// userFuncs are the functions the expression defines (name/arity) and
	// their parameters, callable besides allowedFuncs.
	userFuncs map[string]bool
}

func (w *jqWalker) fail(format string, args ...any) {
	if w.reason == "" {
		w.reason = fmt.Sprintf(format, args...)
	}
}

func isAssignment(op gojq.Operator) bool {
	switch op {
	case gojq.OpAssign, gojq.OpModify, gojq.OpUpdateAdd, gojq.OpUpdateSub,
		gojq.OpUpdateMul, gojq.OpUpdateDiv, gojq.OpUpdateMod, gojq.OpUpdateAlt:
		return true
	}
	return false
}

func (w *jqWalker) query(q *gojq.Query) {
	if q.Meta != nil || len(q.Imports) > 0 {
		w.fail("modules (import, include) are not allowed in a path")
	}
	for _, fd := range q.FuncDefs {
		if why, ok := bannedFuncs[fd.Name]; ok {
			w.fail("defining %q is not allowed: %s", fd.Name, why)
		}
	}
	if isAssignment(q.Op) {
		hint := ".spec.field"
		if q.Left != nil {
			hint = q.Left.String()
		}
		w.fail("assignment (%s) is not allowed in a path; use a read-only path such as %s", q.Op, hint)
	}
}

func (w *jqWalker) pattern(p *gojq.Pattern) {
	if strings.HasPrefix(p.Name, "$__") {
		w.fail("the variable name %s is reserved", p.Name)
	}
	for _, o := range p.Object {
		if strings.HasPrefix(o.Key, "$__") {
			w.fail("the variable name %s is reserved", o.Key)
		}
	}
}

func (w *jqWalker) term(t *gojq.Term) {
	switch t.Type {
	case gojq.TermTypeRecurse:
		w.fail("recursive descent (..) is not allowed in a path; name the fields to read")
	case gojq.TermTypeFormat:
		w.fail("the format %s is not allowed in a path; build the string with interpolation (\"\\(.a)-\\(.b)\") or tostring", t.Format)
	case gojq.TermTypeFunc:
		w.function(t.Func)
	}
}

func (w *jqWalker) function(f *gojq.Func) {
	name := f.Name
	if why, ok := bannedFuncs[name]; ok {
		w.fail("%s is not allowed in a path: %s", name, why)
		return
	}
	// Names with a leading underscore are gojq internals (_range,
	// _modify, …) that would bypass the list above; $__ names are gojq's
	// and muster's own variables.
	if strings.HasPrefix(name, "_") || strings.HasPrefix(name, "$__") {
		w.fail("%s is an internal function and is not allowed in a path", name)
		return
	}
	key := funcKey(name, len(f.Args))
	switch {
	case strings.HasPrefix(name, "$") || w.userFuncs[key] || allowedFuncs[key]:
	case !jqBuiltins[key]:
		msg := "function not defined: " + key
		if s := closest.Closest(key, allowedList); s != "" {
			msg += fmt.Sprintf(" (did you mean %s?)", s)
		}
		w.fail("%s", msg)
	default:
		w.fail("the jq function %s is not allowed in a path: a definition may use the path, comparison, "+
			"string, array, object and math functions listed in the package documentation of definition (\"jq\"), "+
			"so that every evaluation ends within its time and memory budget", key)
	}
}

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

package jq

import (
	"fmt"
	"strings"

	"github.com/itchyny/gojq"
)

// Vars are the values of the caller's variables (the vars of Compile) for
// one run.
type Vars struct {
	// Values by name, without $. A variable with no entry, or a nil one,
	// is null.
	Values map[string]any
	// Unresolved by name, with why: the caller knows the variable stands
	// for something it could not read. The variable is null, and a run
	// that reads it fails with an *UnresolvedError whatever it yields,
	// even inside // or try: a result computed without the value could
	// be wrong rather than merely missing. A run that does not read it is
	// unaffected.
	Unresolved map[string]string
}

// UnresolvedError is a run that read an unresolved variable.
type UnresolvedError struct {
	// Name is the variable's name without $; Why what the caller said.
	Name, Why string
}

func (e *UnresolvedError) Error() string {
	return fmt.Sprintf("reads $%s, which is not resolved: %s", e.Name, e.Why)
}

// RebindError is an expression that binds the name of one of the caller's
// variables itself, whose reads would otherwise be taken for the caller's.
type RebindError struct {
	// Name is the variable, with $.
	Name string
}

func (e *RebindError) Error() string {
	return fmt.Sprintf("%s is a variable the caller binds; bind another name", e.Name)
}

// guardVar is what a variable of the caller becomes in a compiled
// expression: _muster_var($__muster_budget; "name") yields the bound value
// and notes a read of an unresolved one on the run, where // and try cannot
// swallow it (see Run).
const guardVar = "_muster_var"

func varGuard(_ any, args []any) any {
	dl, ok := args[0].(*deadlineCtx)
	name, ok2 := args[1].(string)
	if !ok || !ok2 || dl.vars == nil {
		return nil
	}
	r := dl.vars
	if why, ok := r.vars.Unresolved[name]; ok {
		if r.unresolved == "" {
			r.unresolved, r.why = name, why
		}
		return nil
	}
	return r.vars.Values[name]
}

// varRun is one run's view of the variables: what it may read, and the
// first unresolved variable it read.
type varRun struct {
	vars            *Vars
	unresolved, why string
}

// unresolvedError is the error of a run that read an unresolved variable,
// or nil.
func (r *varRun) unresolvedError() *UnresolvedError {
	if r == nil || r.unresolved == "" {
		return nil
	}
	return &UnresolvedError{Name: r.unresolved, Why: r.why}
}

// bindVars turns every read of a variable $name of vars in q into
// guardVar, and refuses an expression that binds one of those names
// itself. It reports whether q reads one of them. A form it does not
// rewrite (an object shorthand {$name}) stays a variable that gojq does
// not know, so the expression does not compile: refused, never misread.
func bindVars(q *gojq.Query, vars []string) (bool, error) {
	if len(vars) == 0 {
		return false, nil
	}
	names := make(map[string]bool, len(vars))
	for _, v := range vars {
		names["$"+v] = true
	}
	reads := false
	var err error
	bound := func(name string) {
		if names[name] && err == nil {
			err = &RebindError{Name: name}
		}
	}
	(&jqVisitor{
		query: func(q *gojq.Query) {
			for _, fd := range q.FuncDefs {
				for _, a := range fd.Args {
					bound(a)
				}
			}
		},
		pattern: func(p *gojq.Pattern) {
			bound(p.Name)
			for _, o := range p.Object {
				bound(o.Key)
			}
		},
		term: func(t *gojq.Term) {
			if t.Type != gojq.TermTypeFunc || len(t.Func.Args) > 0 || !names[t.Func.Name] {
				return
			}
			reads = true
			t.Func = &gojq.Func{Name: guardVar, Args: []*gojq.Query{
				{Term: &gojq.Term{Type: gojq.TermTypeFunc, Func: &gojq.Func{Name: budgetVar}}},
				{Term: &gojq.Term{Type: gojq.TermTypeString, Str: &gojq.String{Str: strings.TrimPrefix(t.Func.Name, "$")}}},
			}}
		},
	}).walk(q)
	return reads, err
}

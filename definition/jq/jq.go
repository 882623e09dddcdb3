// Package jq is the sandbox every jq expression of a workload definition
// runs in; it and its subpackage schemacheck are the only code of muster
// that imports gojq. A definition is code written by whoever may create a
// Karta, so an expression is bounded before it is parsed, checked against
// an allow-list after, and every run of it ends within its time and memory
// budget, whatever it does.
//
// Compile takes an expression through these stages, each refusing what the
// next could not survive:
//
//  1. bounds: at most MaxExpressionBytes long and MaxExpressionNesting deep
//     (gojq's parser and compiler recurse; a stack overflow is fatal);
//  2. parse (gojq);
//  3. check: the allow-list of functions, no assignments, modules, formats,
//     recursive descent, reserved names or recursion (check.go);
//  4. guard: a budget guard before every construct that can build a value
//     bigger than its inputs (budget.go);
//  5. bind: the caller's variables ($name) read through a guard that notes
//     an unresolved one (vars.go);
//  6. compile (gojq).
//
// Expr.Run then runs the compiled code under a step budget, a byte budget,
// a deadline and a cap on results (run.go). An *Expr is safe for concurrent
// use: it is only run, never changed.
//
// Besides running, the package answers what the parsed expression says
// about itself: ConstPath (a path of constant keys, which a caller may
// read without running jq), SimplePathReason and PathExpr (writing through
// the expression), and Reads (what of its input it can observe). Value,
// Render, Truthy and TypeName are the value form Run reads and yields.
package jq

import (
	"errors"
	"fmt"
	"strings"

	"github.com/itchyny/gojq"
)

// Limits on an expression, checked before gojq sees it. Each is far above
// what a real definition needs: the longest expression of the catalog and
// of the upstream Workload Map catalog is under 600 bytes.
const (
	// MaxExpressionBytes bounds one jq expression.
	MaxExpressionBytes = 4096
	// MaxExpressionNesting bounds how deeply parentheses, brackets, braces
	// and string interpolations nest inside one expression.
	MaxExpressionNesting = 64
)

// Expr is one jq expression, parsed, checked, guarded and compiled once.
type Expr struct {
	src string
	// query is the expression as written: SimplePathReason, Reads and
	// ConstPath read it; the guards are in code only.
	query *gojq.Query
	code  *gojq.Code

	// keys are the keys of a path of constant object keys (simple).
	keys   []string
	simple bool
	// vars is true when the expression reads one of the caller's
	// variables.
	vars bool
}

// String is the expression's source.
func (e *Expr) String() string { return e.src }

// ConstPath returns the keys of e and true when e is a path of constant
// object keys and nothing else (.spec.replicas, .metadata.labels["a/b"];
// "." has no keys). The slice is shared: do not change it.
func (e *Expr) ConstPath() ([]string, bool) { return e.keys, e.simple }

// ReadsVars reports whether e reads one of the variables Compile was given.
func (e *Expr) ReadsVars() bool { return e.vars }

// LimitError is an expression refused before it is parsed: longer than
// MaxExpressionBytes (Depth is 0) or nested deeper than
// MaxExpressionNesting.
type LimitError struct {
	Bytes, Depth int
}

func (e *LimitError) Error() string {
	if e.Depth > 0 {
		return fmt.Sprintf("nests %d levels deep (parentheses, brackets, braces, interpolations); at most %d are allowed", e.Depth, MaxExpressionNesting)
	}
	return fmt.Sprintf("is %d bytes long; at most %d are allowed", e.Bytes, MaxExpressionBytes)
}

// ErrUndefinedVariable is in the error of an expression that reads a
// variable it neither binds nor was given.
var ErrUndefinedVariable = errors.New("variable not defined")

// undefinedVariable marks gojq's compile error for an unknown variable,
// which has no type of its own.
type undefinedVariable struct{ error }

func (undefinedVariable) Is(target error) bool { return target == ErrUndefinedVariable }

// Compile takes src through the stages of the package documentation. vars
// are the names (without $) of the variables the caller binds at each Run
// (Vars). The error says why src is refused, in words for the definition's
// author; a *LimitError, a *RebindError and ErrUndefinedVariable (errors.Is)
// can be told apart.
func Compile(src string, vars []string) (*Expr, error) {
	if err := bounds(src); err != nil {
		return nil, err
	}
	q, err := parse(src)
	if err != nil {
		return nil, err
	}
	if why := checkQuery(q); why != "" {
		return nil, errors.New(why)
	}
	// The guards go into a second parse, so that e.query stays the
	// expression as written.
	guarded, err := guard(src)
	if err != nil {
		return nil, fmt.Errorf("jq expression cannot be guarded: %w", err)
	}
	reads, err := bindVars(guarded, vars)
	if err != nil {
		return nil, err
	}
	code, err := gojq.Compile(guarded, compilerOptions...)
	if err != nil {
		err = fmt.Errorf("jq expression does not compile: %w", err)
		if strings.Contains(err.Error(), "variable not defined") {
			err = undefinedVariable{err}
		}
		return nil, err
	}
	e := &Expr{src: src, query: q, code: code, vars: reads}
	e.keys, e.simple = constPath(q)
	return e, nil
}

// bounds refuses src before gojq sees it: gojq's parser and compiler
// recurse over the expression, and an expression of a few hundred thousand
// terms overflows the Go stack, which no recover() can catch.
func bounds(src string) error {
	if len(src) > MaxExpressionBytes {
		return &LimitError{Bytes: len(src)}
	}
	if d := nesting(src); d > MaxExpressionNesting {
		return &LimitError{Bytes: len(src), Depth: d}
	}
	return nil
}

func parse(src string) (*gojq.Query, error) {
	q, err := gojq.Parse(src)
	if err != nil {
		var pe *gojq.ParseError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("not a valid jq expression: %v at offset %d", err, pe.Offset)
		}
		return nil, errors.New("not a valid jq expression: " + err.Error())
	}
	return q, nil
}

// guard parses src again and rewrites it with the budget's guards.
func guard(src string) (*gojq.Query, error) {
	q, err := gojq.Parse(src)
	if err == nil {
		q, err = rewrite(q)
	}
	return q, err
}

// PathExpr compiles path(e), for writing through e: it yields the paths of
// the values e yields. It runs the guarded expression, since select's
// condition may hold any expression and its growth constructs are budgeted
// here too. It does not bind the caller's variables.
func (e *Expr) PathExpr() (*Expr, error) {
	guarded, err := guard(e.src)
	if err != nil {
		return nil, err
	}
	pq := &gojq.Query{Term: &gojq.Term{Type: gojq.TermTypeFunc, Func: &gojq.Func{Name: "path", Args: []*gojq.Query{guarded}}}}
	code, err := gojq.Compile(pq, compilerOptions...)
	if err != nil {
		return nil, err
	}
	return &Expr{src: "path(" + e.src + ")", query: pq, code: code}, nil
}

// nesting returns the deepest nesting of (), [], {} and string
// interpolations \( ) in a jq expression, skipping the text of string
// literals and comments. It does not validate the expression (the parser
// does that next); it only has to be an upper bound of the parser's depth.
func nesting(src string) int {
	depth, deepest := 0, 0
	// inString[i] is true when nesting level i was opened by an
	// interpolation, so its closing parenthesis returns into a string.
	var interp []bool
	inStr := false
	for i := 0; i < len(src); i++ {
		c := src[i]
		if inStr {
			switch c {
			case '\\':
				if i+1 < len(src) && src[i+1] == '(' {
					i++
					inStr = false
					depth++
					interp = append(interp, true)
					deepest = max(deepest, depth)
					continue
				}
				i++ // skip the escaped character
			case '"':
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '#':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case '(', '[', '{':
			depth++
			interp = append(interp, false)
			deepest = max(deepest, depth)
		case ')', ']', '}':
			if depth > 0 {
				depth--
				back := interp[len(interp)-1]
				interp = interp[:len(interp)-1]
				if back && c == ')' {
					inStr = true
				}
			}
		}
	}
	return deepest
}

package definition

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/itchyny/gojq"

	"github.com/muster-io/muster/internal/closest"
)

// expr is one jq expression of the definition, parsed and compiled once.
type expr struct {
	field string // field path of the expression, for messages
	src   string
	query *gojq.Query
	code  *gojq.Code

	// simple is true when the expression is a path of constant object
	// keys (.spec.replicas, .metadata.labels["a/b"]); eval then walks keys
	// itself instead of running gojq, the common case by far.
	simple bool
	keys   []string
	// pod reads the same value straight from a *corev1.Pod, when keys is
	// one of the metadata paths it knows.
	pod podField
	// refs is true when the expression reads a reference (references.go).
	refs bool
}

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

// walkKeys is what a constant path yields on v, or ok false when jq would
// fail (indexing something other than an object or null), so that the
// caller runs gojq for its exact error.
func walkKeys(v any, keys []string) (any, bool) {
	for _, k := range keys {
		switch m := v.(type) {
		case nil:
		case map[string]any:
			v = m[k]
		default:
			return nil, false
		}
	}
	return v, true
}

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

// simplePathReason says why q cannot be written through, or "" when it is a
// simple path: field and index access, iteration, pipes, commas, select and
// the alternative operator. ".a // .b" picks its path by value, the same way
// an operator picks the template it uses (a LeaderWorkerSet's leaderTemplate
// falls back to its workerTemplate), so writing through the chosen path
// writes the template the pods are made from. Anything that computes a value
// (arithmetic, to_entries, map, user functions) has no path to write.
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

var errTooManyResults = errors.New("too many results")

// deadlineCtx is the deadline of one evaluation. context.WithTimeout
// starts a timer per evaluation, which cost more than running a short
// expression; gojq asks Done before every instruction, so Done itself looks
// at the clock every deadlineCheckEvery calls instead. An evaluation runs
// on one goroutine, which is the only user of its deadlineCtx.
type deadlineCtx struct {
	context.Context
	deadline time.Time
	calls    uint32
	expired  bool
	// cause is why the evaluation stopped: the deadline or the step budget.
	cause error
	// budget is charged by the guards of jqbudget.go, which find it
	// because eval passes this deadlineCtx as the value of budgetVar.
	budget budget
	// refs is set only for an expression that reads references (one
	// pointer here keeps every other evaluation's allocation as it was).
	refs *refEval
}

const deadlineCheckEvery = 256

// closedDone is the Done channel of an expired deadlineCtx.
var closedDone = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

func newDeadlineCtx(parent context.Context, timeout time.Duration) *deadlineCtx {
	return &deadlineCtx{Context: parent, deadline: time.Now().Add(timeout)}
}

func (d *deadlineCtx) Deadline() (time.Time, bool) {
	if pd, ok := d.Context.Deadline(); ok && pd.Before(d.deadline) {
		return pd, true
	}
	return d.deadline, true
}

func (d *deadlineCtx) Done() <-chan struct{} {
	if !d.expired {
		d.calls++
		switch {
		case d.calls > MaxEvalSteps:
			d.expired, d.cause = true, errSteps
		case d.budget.charge(stepBytes) != nil:
			d.expired, d.cause = true, errBytes
		case d.calls%deadlineCheckEvery == 0 && !time.Now().Before(d.deadline):
			d.expired, d.cause = true, context.DeadlineExceeded
		}
	}
	if d.expired {
		return closedDone
	}
	return d.Context.Done()
}

func (d *deadlineCtx) Err() error {
	if d.expired {
		return d.cause
	}
	return d.Context.Err()
}

// eval runs e on input (already in gojq form, see toJQ) under the deadline and
// the result cap of the options.
func (c *Compiled) eval(ctx context.Context, e *expr, input any) ([]any, error) {
	if e.simple {
		if v, ok := walkKeys(input, e.keys); ok {
			return []any{v}, nil
		}
	}
	dl := newDeadlineCtx(ctx, c.opts.Timeout)
	if e.refs {
		dl.refs = &refEval{bound: boundOf(ctx)}
	}
	iter := e.code.RunWithContext(dl, input, dl)
	var out []any
	for {
		v, ok := iter.Next()
		if !ok {
			if ue := dl.refs.unresolvedError(e); ue != nil {
				return nil, ue
			}
			return out, nil
		}
		if err, ok := v.(error); ok {
			// An error after a read of an unresolved reference may come
			// from its null (error("not defined") in a definition's
			// fallback): the missing object is the cause to report.
			if ue := dl.refs.unresolvedError(e); ue != nil {
				return nil, ue
			}
			if errors.Is(err, context.DeadlineExceeded) {
				err = fmt.Errorf("%w %v; simplify the expression", ErrTimeout, c.opts.Timeout)
			}
			return nil, c.evalErr(e, err)
		}
		if len(out) >= c.opts.MaxResults {
			return nil, c.evalErr(e, fmt.Errorf("%w: more than %d values", errTooManyResults, c.opts.MaxResults))
		}
		out = append(out, v)
	}
}

func (c *Compiled) evalErr(e *expr, err error) *EvalError {
	// error("x" * 1000000) is a message of a megabyte: it ends up in
	// events, conditions and the CLI's output, so it is capped here.
	if msg := err.Error(); len(msg) > maxEvalMessage {
		err = errors.New(shorten(msg, maxEvalMessage))
	}
	return &EvalError{Field: e.field, Expression: e.src, Err: err}
}

// maxEvalMessage caps the message of an evaluation error.
const maxEvalMessage = 512

// toJQ returns v in the value types gojq accepts (map[string]any, []any, int,
// float64, *big.Int, string, bool, nil). Unstructured objects carry int64,
// which gojq rejects. Subtrees that need no change are shared, not copied:
// gojq never mutates its input, so sharing is safe and saves most of the
// copying (metadata, strings) on every call.
func toJQ(v any) any {
	out, _ := toJQChanged(v)
	return out
}

func toJQChanged(v any) (any, bool) {
	switch v := v.(type) {
	case map[string]any:
		var out map[string]any
		for k, x := range v {
			if y, changed := toJQChanged(x); changed {
				if out == nil {
					out = maps.Clone(v)
				}
				out[k] = y
			}
		}
		if out != nil {
			return out, true
		}
		return v, false
	case []any:
		var out []any
		for i, x := range v {
			if y, changed := toJQChanged(x); changed {
				if out == nil {
					out = append([]any(nil), v...)
				}
				out[i] = y
			}
		}
		if out != nil {
			return out, true
		}
		return v, false
	case int64:
		if v >= math.MinInt && v <= math.MaxInt {
			return int(v), true
		}
		return new(big.Int).SetInt64(v), true
	case int32:
		return int(v), true
	case float32:
		return float64(v), true
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return toJQChanged(i)
		}
		f, _ := v.Float64()
		return f, true
	case map[string]string:
		m := make(map[string]any, len(v))
		for k, x := range v {
			m[k] = x
		}
		return m, true
	case []string:
		a := make([]any, len(v))
		for i, x := range v {
			a[i] = x
		}
		return a, true
	}
	return v, false
}

// render is a jq value as text: strings as they are, everything else as
// JSON (so true is "true" and 2 is "2").
func render(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case nil:
		return "null"
	case bool:
		return strconv.FormatBool(v)
	case int:
		return strconv.Itoa(v)
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1e15 {
			return strconv.FormatInt(int64(v), 10)
		}
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// truthy is jq truth: everything but null and false.
func truthy(v any) bool { return v != nil && v != false }

// typeName is the jq type name of v, for messages.
func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case int, float64, *big.Int:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

package definition

import (
	"context"
	"errors"

	"github.com/muster-io/muster/definition/jq"
)

// expr is one jq expression of the definition, compiled once by the
// sandbox (package jq).
type expr struct {
	field string // field path of the expression, for messages
	src   string
	code  *jq.Expr

	// simple is true when the expression is a path of constant object
	// keys (.spec.replicas, .metadata.labels["a/b"]); eval then walks keys
	// itself instead of running jq, the common case by far.
	simple bool
	keys   []string
	// pod reads the same value straight from a *corev1.Pod, when keys is
	// one of the metadata paths it knows.
	pod podField
}

// walkKeys is what a constant path yields on v, or ok false when jq would
// fail (indexing something other than an object or null), so that the
// caller runs jq for its exact error.
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

// eval runs e on input (already in jq's value form, see jq.Value) under
// the deadline and the result cap of the options, with the references
// bound to ctx (WithReferences).
func (c *Compiled) eval(ctx context.Context, e *expr, input any) ([]any, error) {
	if e.simple {
		if v, ok := walkKeys(input, e.keys); ok {
			return []any{v}, nil
		}
	}
	if c.onEval != nil {
		c.onEval(e)
	}
	var vars *jq.Vars
	if e.code.ReadsVars() {
		if b := boundOf(ctx); b != nil {
			vars = &b.vars
		}
	}
	out, err := e.code.Run(ctx, input, jq.Limits{Timeout: c.opts.Timeout, MaxResults: c.opts.MaxResults}, vars)
	if err != nil {
		var ue *jq.UnresolvedError
		if errors.As(err, &ue) {
			return nil, &UnresolvedError{Reference: ue.Name, Why: ue.Why, Field: e.field, Expression: e.src}
		}
		// The sandbox has capped the message already.
		return nil, &EvalError{Field: e.field, Expression: e.src, Err: err}
	}
	return out, nil
}

// evalErr is an error the definition finds in what e yields. Its message
// may quote the workload (a kind name, a label key), so it is capped as
// the sandbox caps its own.
func (c *Compiled) evalErr(e *expr, err error) *EvalError {
	if msg := err.Error(); len(msg) > maxEvalMessage {
		err = errors.New(shorten(msg, maxEvalMessage))
	}
	return &EvalError{Field: e.field, Expression: e.src, Err: err}
}

// maxEvalMessage caps the message of an evaluation error.
const maxEvalMessage = 512

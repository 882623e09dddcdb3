package definition

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidationError is every problem found in one definition; each entry is a
// *field.Error naming the field path, the value and the reason. Validate
// returns the list; Compile and Decode wrap it in this type for callers that
// need one error.
type ValidationError struct {
	Definition string
	Errs       []error // each a *field.Error
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	b.WriteString("invalid definition")
	if e.Definition != "" {
		fmt.Fprintf(&b, " %q", e.Definition)
	}
	for i, err := range e.Errs {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(err.Error())
	}
	return b.String()
}

// FieldErrors returns the entries that are *field.Error.
func (e *ValidationError) FieldErrors() field.ErrorList {
	var out field.ErrorList
	for _, err := range e.Errs {
		if fe, ok := err.(*field.Error); ok {
			out = append(out, fe)
		}
	}
	return out
}

func newValidationError(name string, errs field.ErrorList) *ValidationError {
	ve := &ValidationError{Definition: name}
	for _, fe := range errs {
		ve.Errs = append(ve.Errs, fe)
	}
	return ve
}

// EvalError is an expression that failed on a given object: it names the
// field of the definition, the expression and, when known, the component.
type EvalError struct {
	// Field is the definition's field path of the expression.
	Field string
	// Expression is the jq source.
	Expression string
	// Component is the component the expression belongs to, if any.
	Component string
	// Instance is the component instance, when the failure is about one.
	Instance string
	Err      error
}

func (e *EvalError) Error() string {
	var b strings.Builder
	if e.Component != "" {
		fmt.Fprintf(&b, "component %q", e.Component)
		if e.Instance != "" {
			fmt.Fprintf(&b, " instance %q", e.Instance)
		}
		b.WriteString(": ")
	}
	// A long expression is cut: the cause after it is what the reader
	// needs, and pod-grouper reasons are capped at 1 KiB.
	fmt.Fprintf(&b, "%s %q: %v", e.Field, shorten(e.Expression, maxExpressionInMessage), e.Err)
	return b.String()
}

// maxExpressionInMessage caps the expression quoted in an EvalError.
const maxExpressionInMessage = 200

func (e *EvalError) Unwrap() error { return e.Err }

// AnnotationError is a workload annotation muster reads (muster.io/gang,
// muster.io/min-member, muster.io/topology-*) with a value it cannot use.
// Callers tell it apart from a broken definition: the fix is on the
// workload, not in the definition.
type AnnotationError struct {
	Key, Value string
	// Want says which values are allowed.
	Want string
}

func (e *AnnotationError) Error() string {
	return fmt.Sprintf("workload annotation %s: %q: %s", e.Key, e.Value, e.Want)
}

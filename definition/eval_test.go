package definition

import (
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TestEvalErrorNamesField: an expression stopped by the sandbox (package
// jq: budgets, result cap, an error of its own) fails with an *EvalError
// naming the field, and its message stays capped.
func TestEvalErrorNamesField(t *testing.T) {
	big := make([]any, 2000)
	for i := range big {
		big[i] = i
	}
	for _, tc := range []struct{ src, want string }{
		{"[.[] as $a | .[] as $b | .[] as $c | $a] | length", "steps"},
		{".[], .[]", "too many results"},
		{`("x" * 1000000000) | length`, "more than 64 MiB"},
		{`error("x" * 1000000)`, "bytes)"},
	} {
		t.Run(tc.src, func(t *testing.T) {
			e, fe := compileJQ(field.NewPath("spec", "x"), tc.src)
			if fe != nil {
				t.Fatalf("compile: %v", fe)
			}
			c := &Compiled{opts: Options{Timeout: time.Minute, MaxResults: 1000}.withDefaults()}
			_, err := c.eval(ctxT, e, big)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want %q", err, tc.want)
			}
			var ee *EvalError
			if !errors.As(err, &ee) || ee.Field != "spec.x" {
				t.Fatalf("error %v does not name the field", err)
			}
			if n := len(err.Error()); n > 2*maxEvalMessage+len(tc.src) {
				t.Errorf("error message is %d bytes", n)
			}
		})
	}
}

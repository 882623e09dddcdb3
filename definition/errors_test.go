package definition

import (
	"errors"
	"strings"
	"testing"
)

// TestEvalErrorShortensExpression: the cause after a long expression stays
// in the first few hundred bytes of the message.
func TestEvalErrorShortensExpression(t *testing.T) {
	long := strings.Repeat(".a // ", 100) + "error(\"x\")"
	msg := (&EvalError{Field: "spec.x", Expression: long, Err: errors.New("the cause")}).Error()
	if len(msg) > 300 || !strings.HasSuffix(msg, ": the cause") || !strings.Contains(msg, "(610 bytes)") {
		t.Errorf("message %q (%d bytes): want the expression cut and the cause kept", msg, len(msg))
	}
	short := (&EvalError{Field: "spec.x", Expression: ".a", Err: errors.New("c")}).Error()
	if short != `spec.x ".a": c` {
		t.Errorf("short message %q", short)
	}
}

package definition

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestLimits: every input that could make gojq's recursive parser or
// compiler overflow the stack, or make validation do unbounded work, is
// refused with one message naming the field and the limit.
func TestLimits(t *testing.T) {
	withReplicas := func(expr string) string {
		return strings.Replace(minimal, "replicasPath: .spec.replicas", fmt.Sprintf("replicasPath: %q", expr), 1)
	}
	children := func(n int) string {
		var b strings.Builder
		b.WriteString(minimal)
		for i := range n {
			fmt.Fprintf(&b, "      - name: c%d\n        ownerRef: app\n", i)
		}
		return b.String()
	}
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		// 300k terms overflowed gojq's compiler ("fatal error: stack
		// overflow", not recoverable) before the limits existed; the
		// document is refused whole before it is parsed.
		{"300k-term expression", withReplicas(strings.Repeat("0+", 300000) + ".spec.replicas"),
			[]string{"childComponents[0].scaleDefinition.replicasPath", "Too long", "4096"}},
		{"20k-term expression", withReplicas(strings.Repeat("0+", 20000) + ".spec.replicas"),
			[]string{"childComponents[0].scaleDefinition.replicasPath", "Too long", "4096"}},
		{"just over the size limit", withReplicas(".spec.replicas" + strings.Repeat(" ", MaxExpressionBytes)),
			[]string{"replicasPath", "Too long"}},
		{"deep nesting", withReplicas(strings.Repeat("(", 65) + ".spec.replicas" + strings.Repeat(")", 65)),
			[]string{"replicasPath", "nests 65 levels deep", "at most 64"}},
		{"too many components", children(MaxComponents),
			[]string{"spec.structureDefinition.childComponents", "Too many", "at most 63"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k, err := Decode([]byte(tc.yaml))
			if err == nil {
				_, err = Compile(k, Options{})
				var ve *ValidationError
				if !errors.As(err, &ve) {
					t.Fatalf("Compile: %v, want a ValidationError", err)
				}
				if n := len(ve.FieldErrors()); n != 1 {
					t.Errorf("%d errors, want 1: %v", n, err)
				}
			}
			msg := err.Error()
			if len(msg) > 1024 {
				t.Errorf("message is %d bytes, want it short:\n%.300s", len(msg), msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
		})
	}
}

// TestLimitsAdmitNestingAndSizeAtTheLimit: the limits are inclusive.
func TestLimitsAdmitNestingAndSizeAtTheLimit(t *testing.T) {
	at := strings.Repeat("(", MaxExpressionNesting) + ".spec.replicas" + strings.Repeat(")", MaxExpressionNesting)
	k := decodeT(t, strings.Replace(minimal, "replicasPath: .spec.replicas", "replicasPath: "+fmt.Sprintf("%q", at), 1))
	if _, err := Compile(k, Options{}); err != nil {
		t.Fatalf("nesting at the limit refused: %v", err)
	}
}

// TestDefinitionSize: a definition document over MaxDefinitionBytes is
// refused before it is parsed, alone or in a stream.
func TestDefinitionSize(t *testing.T) {
	big := minimal + "# " + strings.Repeat("x", MaxDefinitionBytes) + "\n"
	if _, err := Decode([]byte(big)); err == nil || !strings.Contains(err.Error(), "at most 1024 KiB") {
		t.Errorf("Decode: %v, want the size limit", err)
	}
	padded := strings.Replace(minimal, "metadata: {name: demo}", "metadata: {name: demo, annotations: {pad: "+strings.Repeat("x", MaxDefinitionBytes)+"}}", 1)
	if _, err := DecodeAll([]byte(minimal + "---\n" + padded)); err == nil || !strings.Contains(err.Error(), "document 2") || !strings.Contains(err.Error(), "at most 1024 KiB") {
		t.Errorf("DecodeAll: %v, want the size limit of document 2", err)
	}
	if _, err := Decode([]byte(minimal)); err != nil {
		t.Errorf("a small definition: %v", err)
	}
}

package cli

import (
	"strings"
	"testing"
)

// TestDescribeFileInput: whatever a user feeds to describe -f, the answer
// is one line naming the file, the document and what is wrong, with exit
// code 2 (unreadable input), never a panic or a Go type name.
func TestDescribeFileInput(t *testing.T) {
	tests := []struct {
		name  string
		stdin string
		want  string
	}{
		{"a JSON list", `[1, 2]`, "standard input: document 1 is a list, want a Kubernetes object (apiVersion, kind, metadata.name)"},
		{"a number", `42`, "document 1 is a number, want a Kubernetes object"},
		{"a string", `"train"`, "document 1 is a string, want a Kubernetes object"},
		{"a boolean in the second document", "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\ntrue\n", "document 2 is a boolean"},
		{"no apiVersion", "kind: JobSet\nmetadata: {name: x}\n", "document 1: the JobSet has no apiVersion"},
		{"no kind and no name", "apiVersion: v1\nmetadata: {}\n", "document 1: the object has no kind, no metadata.name"},
		{"no name", "apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\nspec: {}\n", "the JobSet has no metadata.name"},
		{"a list with a number in it", "apiVersion: v1\nkind: List\nitems: [1]\n", "document 1: items[0] is a number, want a Kubernetes object"},
		{"a list item without a name", "apiVersion: v1\nkind: List\nitems: [{apiVersion: v1, kind: Pod}]\n", "items[0]: the Pod has no metadata.name"},
		{"a list whose items is a map", "apiVersion: v1\nkind: List\nitems: {a: 1}\n", "a List whose items is not a list"},
		{"broken YAML", "apiVersion: v1\nkind: [\n", "standard input: document 1:"},
		{"too big", strings.Repeat("#", maxInputBytes+1), "standard input is larger than 16 MiB"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, nil, tc.stdin, "describe", "-f", "-")
			if res.code != 2 {
				t.Errorf("exit %d, want 2", res.code)
			}
			if !strings.Contains(res.stderr, tc.want) {
				t.Errorf("stderr %q does not contain %q", res.stderr, tc.want)
			}
			if n := strings.Count(strings.TrimSpace(res.stderr), "\n"); n != 0 {
				t.Errorf("stderr has %d lines, want one:\n%s", n+1, res.stderr)
			}
			for _, bad := range []string{"map[string]interface", "Go value", "panic", "internal error"} {
				if strings.Contains(res.stderr, bad) {
					t.Errorf("stderr %q contains %q", res.stderr, bad)
				}
			}
		})
	}
}

package jq

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestNesting(t *testing.T) {
	tests := []struct {
		src  string
		want int
	}{
		{".spec.replicas", 0},
		{"(.a // 1) * ((.b // 1) - 1)", 2},
		{`.metadata.labels["a/b"]`, 1},
		{`"(((" + .a`, 0},   // parentheses inside a string do not count
		{`"\(.a)"`, 1},      // an interpolation opens a level
		{`"\("\(.a)")"`, 2}, // and nests
		{`"x\\" + (.a)`, 1}, // an escaped backslash ends nothing
		{"# ((((\n.a", 0},   // comments are skipped
		{strings.Repeat("[", 70) + strings.Repeat("]", 70), 70},
	}
	for _, tc := range tests {
		if got := nesting(tc.src); got != tc.want {
			t.Errorf("nesting(%q) = %d, want %d", tc.src, got, tc.want)
		}
	}
}

// TestCompileErrors: the refusals a caller tells apart are typed, whatever
// the message says.
func TestCompileErrors(t *testing.T) {
	var le *LimitError
	if _, err := Compile(".a"+strings.Repeat(" ", MaxExpressionBytes), nil); !errors.As(err, &le) || le.Depth != 0 {
		t.Errorf("too long: %v, want a *LimitError without depth", err)
	}
	deep := strings.Repeat("(", MaxExpressionNesting+1) + ".a" + strings.Repeat(")", MaxExpressionNesting+1)
	if _, err := Compile(deep, nil); !errors.As(err, &le) || le.Depth != MaxExpressionNesting+1 {
		t.Errorf("too deep: %v, want a *LimitError of depth %d", err, MaxExpressionNesting+1)
	}
	var re *RebindError
	if _, err := Compile(".spec as $rt | $rt.x", []string{"rt"}); !errors.As(err, &re) || re.Name != "$rt" {
		t.Errorf("rebinding: %v, want a *RebindError for $rt", err)
	}
	if _, err := Compile("$rt", nil); !errors.Is(err, ErrUndefinedVariable) {
		t.Errorf("unknown variable: %v, want ErrUndefinedVariable", err)
	}
	if _, err := Compile(".a |", nil); err == nil || !strings.Contains(err.Error(), "not a valid jq expression") {
		t.Errorf("parse error: %v", err)
	}
}

// TestVars: a variable reads its bound value; an unresolved one fails the
// run even where // or try would swallow an error.
func TestVars(t *testing.T) {
	vars := &Vars{Values: map[string]any{"rt": map[string]any{"n": 3}}}
	e, err := Compile("$rt.n // 1", []string{"rt"})
	if err != nil || !e.ReadsVars() {
		t.Fatalf("compile: %v, reads vars %v", err, e != nil && e.ReadsVars())
	}
	if got, err := e.Run(ctxT, nil, limitsT(time.Second), vars); err != nil || len(got) != 1 || got[0] != 3 {
		t.Errorf("bound: %v, %v; want [3]", got, err)
	}
	if got, err := e.Run(ctxT, nil, limitsT(time.Second), nil); err != nil || len(got) != 1 || got[0] != 1 {
		t.Errorf("unbound: %v, %v; want [1]", got, err)
	}
	unresolved := &Vars{Unresolved: map[string]string{"rt": "not found"}}
	var ue *UnresolvedError
	if _, err := e.Run(ctxT, nil, limitsT(time.Second), unresolved); !errors.As(err, &ue) || ue.Name != "rt" || ue.Why != "not found" {
		t.Errorf("unresolved: %v, want an *UnresolvedError", err)
	}
	if compileT(t, ".a").ReadsVars() {
		t.Error(".a reads a variable")
	}
}

func TestConstPath(t *testing.T) {
	for _, tc := range []struct {
		src  string
		keys []string // nil: not a constant path
	}{
		{`.`, []string{}},
		{`.a`, []string{"a"}},
		{`.a.b`, []string{"a", "b"}},
		{`.metadata.labels["a/b"]`, []string{"metadata", "labels", "a/b"}},
		{`."a b".c`, []string{"a b", "c"}},
		{`(.a).b`, []string{"a", "b"}},
		{`.a[0]`, nil},
		{`.a?`, nil},
		{`.a[]`, nil},
		{`.a[.b]`, nil},
		{`.a | .b`, nil},
		{`.a[1:2]`, nil},
		{`."\(.x)"`, nil},
	} {
		keys, simple := compileT(t, tc.src).ConstPath()
		if simple != (tc.keys != nil) || !cmp.Equal(keys, tc.keys) && tc.keys != nil {
			t.Errorf("%s: simple %v keys %q, want %q", tc.src, simple, keys, tc.keys)
		}
	}
}

func TestSimplePathReason(t *testing.T) {
	for _, tc := range []struct {
		src      string
		writable bool
	}{
		{".spec.template", true},
		{`.spec.replicatedJobs[].template.spec.template`, true},
		{`.spec.list[] | select(.name == "x") | .template`, true},
		{`.spec["a b"].c[0]`, true},
		{`.a, .b`, true},
		{`first(.spec.items[])`, true},
		{`.a // .b`, true},
		{`.spec.x | to_entries[] | .value.template`, false},
		{`.a + 1`, false},
		{`{a: 1}`, false},
		{`def f: .a; f`, false},
	} {
		if got := compileT(t, tc.src).SimplePathReason() == ""; got != tc.writable {
			t.Errorf("%s: writable %v, want %v", tc.src, got, tc.writable)
		}
	}
}

package jq

import (
	"strings"
	"testing"

	"github.com/itchyny/gojq"
)

func TestCheckQuery(t *testing.T) {
	tests := []struct {
		src  string
		want string // "" = allowed
	}{
		{".spec.replicas", ""},
		{`.spec.replicatedJobs[] | (.replicas // 1) * (.template.spec.parallelism // 1)`, ""},
		{`getpath(["spec","x"])`, ""},
		{`[limit(3; .spec.items[])]`, ""},
		{`if .a then error("x") else 1 end`, ""},
		{`.a as [$x, {b: $y}] | $x`, ""},
		{`def f: .a; f`, ""},
		{".a = 1", "assignment (=)"},
		{".a |= 1", "assignment (|=)"},
		{".a += 1", "assignment (+=)"},
		{".a -= 1", "assignment (-=)"},
		{".a *= 1", "assignment (*=)"},
		{".a /= 1", "assignment (/=)"},
		{".a %= 1", "assignment (%=)"},
		{".a //= 1", "assignment (//=)"},
		{"del(.a)", "del modifies"},
		{"..", "recursive descent"},
		{"[.. | numbers]", "recursive descent"},
		{"recurse", "recurse"},
		{"walk(.)", "walk"},
		{"[range(10)]", "range"},
		{"[limit(5; repeat(1))]", "repeat"},
		{"[paths]", "paths"},
		{"[leaf_paths]", "leaf_paths"},
		{"env.HOME", "env"},
		{"$ENV.HOME", "$ENV"},
		{"input", "input"},
		{"[inputs]", "inputs"},
		{"debug", "debug"},
		{"stderr", "stderr"},
		{"input_filename", "input_filename"},
		{"halt", "halt"},
		{`halt_error`, "halt_error"},
		{"setpath([\"a\"]; 1)", "setpath"},
		{"delpaths([[\"a\"]])", "delpaths"},
		{"$__loc__", "$__loc__"},
		{"_range(0; 10; 1)", "internal"},
		// Banned constructs hidden in every kind of node.
		{"def f: del(.a); f", "del"},
		{`{a: (.x |= 1)}`, "assignment"},
		{`{(.x |= "k"): 1}`, "assignment"},
		{`"\(.a |= 1)"`, "assignment"},
		{`.[.a |= 1]`, "assignment"},
		{`.[1:(.a |= 1)]`, "assignment"},
		{`try (.a |= 1) catch .`, "assignment"},
		{`try 1 catch (.a |= 1)`, "assignment"},
		{`reduce .[] as $x (0; . += $x)`, "assignment"},
		{`foreach .[] as $x (0; .; range(1))`, "range"},
		{`if .a then 1 elif (.b |= 1) then 2 else 3 end`, "assignment"},
		{`if .a then 1 else [..] end`, "recursive descent"},
		{`label $out | recurse`, "recurse"},
		{`-(.a |= 1)`, "assignment"},
		{`"x\(env)"`, "env"},
		{`[.[] | {a: [.b | walk(.)]}]`, "walk"},
		{`. as {(env.X): $v} | $v`, "env"},
		{`def walk(f): f; walk(.)`, "walk"},
	}
	for _, tc := range tests {
		t.Run(tc.src, func(t *testing.T) {
			q, err := gojq.Parse(tc.src)
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			got := checkQuery(q)
			if tc.want == "" {
				if got != "" {
					t.Fatalf("rejected: %s", got)
				}
				return
			}
			if !strings.Contains(got, tc.want) {
				t.Fatalf("reason %q, want it to mention %q", got, tc.want)
			}
		})
	}
}

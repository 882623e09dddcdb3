package jq

import "testing"

// TestReads: what an expression can observe of its input (a pod, in these
// cases, which is what the definition package asks about).
func TestReads(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{`.metadata.labels["a/b"]`, "[.metadata.labels]"},
		{`.metadata.name`, "[.metadata.name]"},
		{`.metadata.labels["x"] == null and .metadata.labels.app != null`, "[.metadata.labels]"},
		{`.metadata.labels["w"] | select(. != null and . != "0")`, "[.metadata.labels]"},
		{`.metadata | .labels.x`, "[.metadata.labels]"},
		{`(.metadata).name`, "[.metadata.name]"},
		{`.metadata`, "[.metadata]"},
		{`.metadata | keys`, "[.metadata]"},
		{`.metadata as $m | $m.name`, "[.metadata]"},
		{`.metadata.labels as {app: $a} | $a`, "[.metadata.labels]"},
		{`.metadata.labels[.metadata.name]`, "[.metadata.labels .metadata.name]"},
		{`.metadata.ownerReferences[0].name`, "[.metadata.ownerReferences]"},
		{`[.metadata.labels[]] | length`, "[.metadata.labels]"},
		{`.spec.nodeName`, "[.spec.nodeName]"},
		{`if .metadata.name then .status.phase else "x" end`, "[.metadata.name .status.phase]"},
		{`if .metadata.name then .status.phase elif .kind then 1 end`, "all"}, // no else: the pod itself
		{`{name: .metadata.name}`, "[.metadata.name]"},
		{`{kind}`, "[.kind]"},
		{`reduce .spec.containers[] as $c (0; . + 1)`, "[.spec.containers]"},
		{`try .spec.x catch .`, "[.spec.x]"},
		{`"\(.metadata.name)-x"`, "[.metadata.name]"},
		{`first(.metadata.name, .spec.x)`, "[.metadata.name .spec.x]"},
		{`.metadata.labels | to_entries`, "[.metadata.labels]"},
		{`select(.metadata.name == "a") | .status`, "[.metadata.name .status]"},
		{`.metadata.name // .metadata.generateName`, "[.metadata.generateName .metadata.name]"},
		{`.metadata.name | ascii_downcase`, "[.metadata.name]"},
		{`.metadata.name?`, "[.metadata.name]"},
		{`label $out | .metadata.name`, "[.metadata.name]"},
		{`-(.spec.priority)`, "[.spec.priority]"},
		{`.metadata.labels | has("a")`, "[.metadata.labels]"},
		{`.`, "all"},
		{`keys`, "all"},
		{`tostring`, "all"},
		{`tojson`, "all"},
		{`[.[]]`, "all"},
		{`. as $p | $p.spec`, "all"},
		{`.[.metadata.name]`, "all"},
		{`def f: .spec; f`, "all"},
		{`getpath(["spec"])`, "all"},
		{`select(.metadata.name == "a")`, "all"},
		{`.metadata.name, .`, "all"},
		{`{"\(.kind)"}`, "all"},
	} {
		n := &Reads{}
		n.Add(compileT(t, tc.src))
		if got := n.String(); got != tc.want {
			t.Errorf("%s: needs %s, want %s", tc.src, got, tc.want)
		}
	}
}

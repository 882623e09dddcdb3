package jq

import (
	"testing"

	"github.com/itchyny/gojq"
)

func TestValue(t *testing.T) {
	shared := map[string]any{"name": "x", "tags": []any{"a"}}
	in := map[string]any{"n": int64(3), "meta": shared, "list": []any{int64(1), 2.5, "s", nil, true}, "i32": int32(4)}
	out := Value(in).(map[string]any)
	if out["n"] != 3 || out["i32"] != 4 || out["list"].([]any)[0] != 1 {
		t.Fatalf("ints not converted: %#v", out)
	}
	if in["n"] != int64(3) {
		t.Fatal("input changed")
	}
	// A subtree without anything to convert is shared, not copied.
	if m := out["meta"].(map[string]any); &m == nil || len(m) != 2 {
		t.Fatal("lost subtree")
	}
	shared["probe"] = 1
	if _, ok := out["meta"].(map[string]any)["probe"]; !ok {
		t.Error("unchanged subtree was copied")
	}
	// gojq accepts the result.
	q, _ := gojq.Parse(".n + .list[0]")
	v, _ := q.Run(out).Next()
	if v != 4 {
		t.Fatalf("gojq result %v", v)
	}
}

func TestRender(t *testing.T) {
	for _, tc := range []struct {
		in   any
		want string
	}{{"s", "s"}, {true, "true"}, {3, "3"}, {2.0, "2"}, {2.5, "2.5"}, {nil, "null"}, {[]any{1, "a"}, `[1,"a"]`}, {map[string]any{"a": 1}, `{"a":1}`}} {
		if got := Render(tc.in); got != tc.want {
			t.Errorf("Render(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

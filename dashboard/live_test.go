package dashboard

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// TestMemo: a value is computed once per object version, recomputed for a
// new version, and dropped by the sweep after a snapshot that did not ask
// about its object.
func TestMemo(t *testing.T) {
	m := newMemo[string]()
	calls := 0
	get := func(uid types.UID, version string) string {
		return m.get(uid, version, func() string { calls++; return string(uid) + "@" + version })
	}
	steps := []struct {
		uid, version, want string
		calls              int
		sweep              bool
	}{
		{uid: "a", version: "1", want: "a@1", calls: 1},
		{uid: "a", version: "1", want: "a@1", calls: 1, sweep: true},
		{uid: "a", version: "2", want: "a@2", calls: 2},
		{uid: "b", version: "1", want: "b@1", calls: 3, sweep: true}, // a not asked after this sweep
		{uid: "b", version: "1", want: "b@1", calls: 3, sweep: true},
		{uid: "a", version: "2", want: "a@2", calls: 4}, // swept: computed again
	}
	for i, s := range steps {
		if got := get(types.UID(s.uid), s.version); got != s.want || calls != s.calls {
			t.Fatalf("step %d: %q after %d computations, want %q after %d", i, got, calls, s.want, s.calls)
		}
		if s.sweep {
			m.sweep()
		}
	}
}

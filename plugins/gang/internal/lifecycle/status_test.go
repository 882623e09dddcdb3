package lifecycle

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestInFlight(t *testing.T) {
	tr, c, _ := newTracker(t)
	pods := c.gang("g", pod("a"), pod("b"), pod("c"))
	if n := tr.InFlight(gangKey("g")); n != 0 {
		t.Errorf("unknown gang: %d in flight", n)
	}
	storePlan(t, tr, "g", t0.Add(time.Hour), pods[1:], "n1", "n1")
	tr.Reserve(gangKey("g"), pods[0].UID, "n1")
	if n := tr.InFlight(gangKey("g")); n != 3 {
		t.Errorf("%d in flight, want 3 (one reserved, two planned)", n)
	}
}

// The quorum's bind is recorded once per PodGroup, and ends a partly bound
// spell.
func TestQuorumBound(t *testing.T) {
	tr, _, _ := newTracker(t)
	bound := map[types.UID]bool{"uid-a": true}
	tr.NotePartial(gangKey("g"), bound, true, t0)
	for _, step := range []struct {
		uid  types.UID
		want bool
	}{{"pg-1", true}, {"pg-1", false}, {"pg-2", true}} {
		if got := tr.QuorumBound(gangKey("g"), step.uid); got != step.want {
			t.Errorf("QuorumBound(%s) %v, want %v", step.uid, got, step.want)
		}
	}
	if since, _ := tr.NotePartial(gangKey("g"), bound, true, t0.Add(time.Minute)); !since.Equal(t0.Add(time.Minute)) {
		t.Errorf("partly bound since %s after the quorum bound, want a new spell from %s", since, t0.Add(time.Minute))
	}
}

func TestNoteElastic(t *testing.T) {
	tr, _, _ := newTracker(t)
	for i, step := range []struct {
		summary string
		want    bool
	}{{"quorum 2/2, extras 0/1", true}, {"quorum 2/2, extras 0/1", false}, {"quorum 2/2, extras 1/1", true}} {
		if got := tr.NoteElastic(gangKey("g"), step.summary); got != step.want {
			t.Errorf("step %d: changed %v, want %v", i, got, step.want)
		}
	}
}

// A partly bound spell starts when the caller sees the gang partly bound
// with no bind in flight, lasts while that holds, and ends when it does not.
func TestNotePartial(t *testing.T) {
	bound := map[types.UID]bool{"uid-a": true}
	tests := []struct {
		name     string
		reserved []string // members reserved
		partial  bool
		want     bool
	}{
		{name: "partly bound", partial: true, want: true},
		{name: "not partly bound", partial: false, want: false},
		{name: "a bind in flight", reserved: []string{"b"}, partial: true, want: false},
		{name: "a bound member's reservation", reserved: []string{"a"}, partial: true, want: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr, _, _ := newTracker(t)
			tr.NotePartial(gangKey("g"), bound, true, t0)
			for _, name := range tc.reserved {
				tr.Reserve(gangKey("g"), types.UID("uid-"+name), "n1")
			}
			since, ok := tr.NotePartial(gangKey("g"), bound, tc.partial, t0.Add(time.Minute))
			if ok != tc.want || (ok && !since.Equal(t0)) {
				t.Errorf("NotePartial %s %v, want %v since %s", since, ok, tc.want, t0)
			}
			if !tc.want && len(tc.reserved) == 0 {
				// The spell ended: the next one starts afresh.
				if since, _ := tr.NotePartial(gangKey("g"), bound, true, t0.Add(time.Hour)); !since.Equal(t0.Add(time.Hour)) {
					t.Errorf("new spell since %s, want %s", since, t0.Add(time.Hour))
				}
			}
		})
	}
	tr, _, _ := newTracker(t)
	tr.NotePartial(gangKey("g"), bound, true, t0)
	tr.EvictedPartial(gangKey("g"))
	if since, _ := tr.NotePartial(gangKey("g"), bound, true, t0.Add(time.Hour)); !since.Equal(t0.Add(time.Hour)) {
		t.Errorf("after the eviction: since %s, want a new spell from %s", since, t0.Add(time.Hour))
	}
}

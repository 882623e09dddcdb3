package podgrouper

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-io/muster/api"
)

func TestCombine(t *testing.T) {
	p := func(v int32, class string) podPriority { return podPriority{value: v, class: class, set: true} }
	cases := []struct {
		name      string
		members   []podPriority
		want      podPriority
		wantMixed bool
		wantDesc  string
	}{
		{name: "no member", want: podPriority{}},
		{name: "no member with a priority", members: []podPriority{{}, {}}, want: podPriority{}},
		{name: "one class", members: []podPriority{p(10, "low"), p(10, "low"), {}}, want: p(10, "low"), wantDesc: "10 (low)"},
		{name: "mixed: the highest wins", members: []podPriority{p(10, "low"), p(1000, "high"), p(10, "low")}, want: p(1000, "high"), wantMixed: true, wantDesc: "1000 (high), 10 (low)"},
		{name: "same value, two classes: first by name", members: []podPriority{p(5, "zeta"), p(5, "alpha")}, want: p(5, "alpha"), wantMixed: true, wantDesc: "5 (alpha), 5 (zeta)"},
		{name: "no class and negative", members: []podPriority{p(-5, ""), p(0, "")}, want: p(0, ""), wantMixed: true, wantDesc: "0, -5"},
		{name: "extremes", members: []podPriority{p(math.MinInt32, "min"), p(math.MaxInt32, "max")}, want: p(math.MaxInt32, "max"), wantMixed: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := combine(tc.members)
			if g.podPriority != tc.want {
				t.Errorf("priority %+v, want %+v", g.podPriority, tc.want)
			}
			if g.mixed() != tc.wantMixed {
				t.Errorf("mixed %v, want %v (values %v)", g.mixed(), tc.wantMixed, g.values)
			}
			if tc.wantDesc != "" && g.describe() != tc.wantDesc {
				t.Errorf("describe %q, want %q", g.describe(), tc.wantDesc)
			}
		})
	}
}

func withPriority(v int32, class string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Priority = ptr.To(v)
		p.Spec.PriorityClassName = class
	}
}

// pgPriority reads the priority annotations of PodGroup train.
func pgPriority(t *testing.T, w *world) (string, string) {
	t.Helper()
	pg, err := w.pg.SchedulingV1alpha1().PodGroups("ns").Get(w.ctx, "train", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := pg.Annotations[api.AnnotationPriority]; !ok {
		return "<none>", "<none>"
	}
	return pg.Annotations[api.AnnotationPriority], pg.Annotations[api.AnnotationPriorityClass]
}

func countReason(events []string, reason string) int {
	n := 0
	for _, e := range events {
		if strings.Contains(e, " "+reason+" ") {
			n++
		}
	}
	return n
}

// TestGangPriority: the PodGroup carries the highest member priority; a
// mixed gang is warned about (once per workload and once per lower member,
// not per sync); the priority comes down when the member that raised it
// goes; members synced before their labels reach the cache (concurrent
// syncs) and members only the cache shows (a restarted process) all count.
func TestGangPriority(t *testing.T) {
	owners := []*obj{pipeline, trainer, job}

	t.Run("mixed gang, highest wins, comes down when the high member goes", func(t *testing.T) {
		testGangPriorityMixed(t, owners)
	})

	t.Run("a restarted process counts the labelled members in the cache", func(t *testing.T) {
		high := makePod("p1", job, withPriority(1000, "high"), withLabel(api.LabelPodGroup, "train"))
		low := makePod("p0", job, withPriority(10, "low"))
		pg := musterPG("train", 2)
		pg.Annotations = map[string]string{api.AnnotationPriority: "1000", api.AnnotationPriorityClass: "high"}
		w := newWorld(t, testDefs(trainerGang(2)), owners, owners, []*corev1.Pod{low, high}, []*schedv1alpha1.PodGroup{pg})
		if err := w.ctrl.sync(w.ctx, "ns/p0"); err != nil {
			t.Fatal(err)
		}
		if v, c := pgPriority(t, w); v != "1000" || c != "high" {
			t.Errorf("priority %s class %s, want 1000 high kept", v, c)
		}
	})

	t.Run("pods without spec.priority write none and drop a stale one", func(t *testing.T) {
		pg := musterPG("train", 2)
		pg.Annotations = map[string]string{api.AnnotationPriority: "7", api.AnnotationPriorityClass: "old", "other": "kept"}
		w := newWorld(t, testDefs(trainerGang(2)), owners, owners, []*corev1.Pod{makePod("p0", job)}, []*schedv1alpha1.PodGroup{pg})
		if err := w.ctrl.sync(w.ctx, "ns/p0"); err != nil {
			t.Fatal(err)
		}
		got, err := w.pg.SchedulingV1alpha1().PodGroups("ns").Get(w.ctx, "train", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(map[string]string{"other": "kept", api.AnnotationTopologyRequired: "rack"}, got.Annotations); diff != "" {
			t.Errorf("annotations (-want +got):\n%s", diff)
		}
	})
}

// testGangPriorityMixed: a gang of a low and a high member gets the high
// priority, is warned about once, and comes down to the low priority when
// the high member goes.
func testGangPriorityMixed(t *testing.T, owners []*obj) {
	low := makePod("p0", job, withPriority(10, "low"))
	high := makePod("p1", job, withPriority(1000, "high"))
	w := newWorld(t, testDefs(trainerGang(2)), owners, owners, []*corev1.Pod{low, high}, nil)
	if err := w.ctrl.sync(w.ctx, "ns/p0"); err != nil {
		t.Fatal(err)
	}
	if v, c := pgPriority(t, w); v != "10" || c != "low" {
		t.Errorf("after the low member: priority %s class %s, want 10 low", v, c)
	}
	if n := countReason(w.events(), eventReasonPriorityMixed); n != 0 {
		t.Errorf("%d %s events with one member synced", n, eventReasonPriorityMixed)
	}
	// p1 synced before p0's label is in the cache: the recorded
	// member still counts, and the higher priority wins.
	if err := w.ctrl.sync(w.ctx, "ns/p1"); err != nil {
		t.Fatal(err)
	}
	if v, c := pgPriority(t, w); v != "1000" || c != "high" {
		t.Errorf("after the high member: priority %s class %s, want 1000 high", v, c)
	}
	events := w.events()
	if n := countReason(events, eventReasonPriorityMixed); n != 1 || !strings.Contains(events[0], "1000 (high), 10 (low)") {
		t.Errorf("events %q, want one %s on the workload naming both priorities", events, eventReasonPriorityMixed)
	}
	// The low member synced again: the gang keeps the highest, the
	// low member is told once, the workload note is not repeated.
	waitSynced(t, w, "p1")
	for range 2 {
		if err := w.ctrl.sync(w.ctx, "ns/p0"); err != nil {
			t.Fatal(err)
		}
	}
	if v, _ := pgPriority(t, w); v != "1000" {
		t.Errorf("the low member's sync lowered the gang's priority to %s", v)
	}
	if n := countReason(w.events(), eventReasonPriorityMixed); n != 1 {
		t.Errorf("%d %s events for the low member over two syncs, want 1", n, eventReasonPriorityMixed)
	}

	// The high member goes: the informer's delete handler requeues the
	// remaining member, whose sync brings the priority down.
	deleteMember(t, w, "p1", "p0")
	k := "ns/p0"
	if err := w.ctrl.sync(w.ctx, k); err != nil {
		t.Fatal(err)
	}
	if v, c := pgPriority(t, w); v != "10" || c != "low" {
		t.Errorf("after the high member left: priority %s class %s, want 10 low", v, c)
	}
}

// deleteMember deletes pod gone and waits until the informers have seen
// it go (it is out of the cache and its recorded priority is forgotten)
// and the delete handler has queued the remaining member.
func deleteMember(t *testing.T, w *world, gone, remaining string) {
	t.Helper()
	waitSynced(t, w, remaining)
	drainQueue(w)
	if err := w.kube.CoreV1().Pods("ns").Delete(w.ctx, gone, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	err := wait.PollUntilContextTimeout(w.ctx, time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		for _, k := range drainQueue(w) {
			seen[k] = true
		}
		_, cached := w.ctrl.podLister.Pods("ns").Get(gone)
		recorded := w.ctrl.priorities.recorded("ns/" + gone)
		return seen["ns/"+remaining] && cached != nil && !recorded, nil
	})
	if err != nil {
		t.Fatalf("after deleting %s: queued %v: %v", gone, seen, err)
	}
}

// drainQueue takes every key out of the controller's queue.
func drainQueue(w *world) []string {
	var out []string
	for w.ctrl.queue.Len() > 0 {
		k, _ := w.ctrl.queue.Get()
		w.ctrl.queue.Done(k)
		out = append(out, k)
	}
	return out
}

// recorded reports whether pod is a recorded member of some gang.
func (m *memberPriorities) recorded(pod string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.gangOf[pod]
	return ok
}

// TestMemberPriorities: the per-gang counts follow sets, changes and
// removals, and seed adds the cached members once per gang, never over a
// recorded one.
func TestMemberPriorities(t *testing.T) {
	p := func(v int32) podPriority { return podPriority{value: v, set: true} }
	m := newMemberPriorities()
	m.set("ns/a", "ns/g", p(10))
	m.set("ns/a", "ns/g", p(10)) // again: no double count
	m.set("ns/b", "ns/g", p(50))
	if g := m.priority("ns/g"); g.value != 50 || !g.mixed() {
		t.Errorf("priority %+v, want 50, mixed", g)
	}
	m.set("ns/b", "ns/g", p(10)) // b's priority changed
	if g := m.priority("ns/g"); g.value != 10 || g.mixed() {
		t.Errorf("after b changed: %+v, want 10, not mixed", g)
	}
	if got := m.gangs["ns/g"].counts; len(got) != 1 || got[p(10)] != 2 {
		t.Errorf("counts %v, want {10: 2}", got)
	}
	m.set("ns/b", "ns/h", p(70)) // b moved to another gang
	if g, h := m.priority("ns/g"), m.priority("ns/h"); g.value != 10 || h.value != 70 {
		t.Errorf("after b moved: g %+v h %+v", g, h)
	}

	calls := 0
	cached := func() []*corev1.Pod {
		calls++
		return []*corev1.Pod{makePod("a", nil, withPriority(1, "")), makePod("c", nil, withPriority(90, ""))}
	}
	m.seed("ns/g", cached)
	m.seed("ns/g", cached)
	if calls != 1 {
		t.Errorf("the cache was read %d times for one gang, want 1", calls)
	}
	// a is recorded (10) and keeps it; c is new (90).
	if g := m.priority("ns/g"); g.value != 90 || g.describe() != "90, 10" {
		t.Errorf("after seed: %+v (%s), want 90 over 90, 10", g, g.describe())
	}
	for _, k := range []string{"ns/a", "ns/c"} {
		if _, _, ok := m.remove(k); !ok {
			t.Errorf("%s was not recorded", k)
		}
	}
	if _, ok := m.gangs["ns/g"]; ok {
		t.Errorf("gang g kept after its last member went: %+v", m.gangs["ns/g"])
	}
}

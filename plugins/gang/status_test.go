package gang

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	testingclock "k8s.io/utils/clock/testing"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	pgfake "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned/fake"
	pglisters "sigs.k8s.io/scheduler-plugins/pkg/generated/listers/scheduling/v1alpha1"

	"github.com/muster-io/muster/plugins/gang/internal/lifecycle"
)

// A PodGroup's status is written only on change and at most once per
// statusMinInterval; a change inside the interval is written after it.
func TestStatusWritesCoalesce(t *testing.T) {
	ctx := context.Background()
	pg := podGroup("g", 2)
	key := types.NamespacedName{Namespace: "ns", Name: "g"}
	client := pgfake.NewClientset(pg)
	pgStore := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	podStore := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{gangIndex: indexByGang})
	clk := testingclock.NewFakeClock(t0)
	p := &Plugin{clock: clk, pgClient: client, pgLister: pglisters.NewPodGroupLister(pgStore),
		podIndexer: podStore, indexed: true, gangs: lifecycle.New(lifecycle.Config{Name: Name, Clock: clk})}
	p.pgSynced.Store(true)
	p.leading.Store(true)
	p.status = newStatusUpdater(p)
	t.Cleanup(p.status.queue.ShutDown)
	if err := pgStore.Add(pg); err != nil {
		t.Fatal(err)
	}
	a, b := gpuPod("g-a", 1, inGang("g")), gpuPod("g-b", 1, inGang("g"))
	for _, pod := range []*v1.Pod{a, b} {
		if err := podStore.Add(pod); err != nil {
			t.Fatal(err)
		}
	}

	// writes counts the status updates sent; like the informer, the store
	// then sees the written object.
	writes := func() int {
		t.Helper()
		n := 0
		for _, act := range client.Actions() {
			if act.GetVerb() == "update" && act.GetSubresource() == "status" {
				n++
			}
		}
		cur, err := client.SchedulingV1alpha1().PodGroups("ns").Get(ctx, "g", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := pgStore.Update(cur); err != nil {
			t.Fatal(err)
		}
		return n
	}
	phase := func() schedv1alpha1.PodGroupPhase {
		obj, _, _ := pgStore.GetByKey("ns/g")
		return obj.(*schedv1alpha1.PodGroup).Status.Phase
	}
	bind := func(pod *v1.Pod, running bool) {
		t.Helper()
		pod = pod.DeepCopy()
		pod.Spec.NodeName = "n1"
		if running {
			pod.Status.Phase = v1.PodRunning
		}
		if err := podStore.Update(pod); err != nil {
			t.Fatal(err)
		}
	}

	steps := []struct {
		name      string
		do        func()
		wantN     int
		wantPhase schedv1alpha1.PodGroupPhase
	}{
		{"first status is written", func() {}, 1, schedv1alpha1.PodGroupPending},
		{"no change, no write", func() {}, 1, schedv1alpha1.PodGroupPending},
		{"a change within the interval waits", func() { bind(a, false) }, 1, schedv1alpha1.PodGroupPending},
		{"another change within the interval waits too", func() { bind(b, false); clk.Step(statusMinInterval / 2) }, 1, schedv1alpha1.PodGroupPending},
		{"after the interval the latest state is written once", func() { clk.Step(statusMinInterval / 2) }, 2, schedv1alpha1.PodGroupScheduling},
		{"running within the interval waits", func() { bind(a, true); bind(b, true) }, 2, schedv1alpha1.PodGroupScheduling},
		{"and is written after it", func() { clk.Step(statusMinInterval) }, 3, schedv1alpha1.PodGroupRunning},
		{"nothing changed since", func() { clk.Step(time.Hour) }, 3, schedv1alpha1.PodGroupRunning},
	}
	for _, st := range steps {
		st.do()
		if err := p.status.sync(ctx, key); err != nil {
			t.Fatalf("%s: sync: %v", st.name, err)
		}
		if n := writes(); n != st.wantN || phase() != st.wantPhase {
			t.Fatalf("%s: %d writes, phase %q; want %d, %q", st.name, n, phase(), st.wantN, st.wantPhase)
		}
	}
	// A PodGroup that is gone leaves no bookkeeping behind.
	if err := pgStore.Delete(pg); err != nil {
		t.Fatal(err)
	}
	if err := p.status.sync(ctx, key); err != nil {
		t.Fatal(err)
	}
	if wait := p.status.holdOff(key, clk.Now()); wait != 0 {
		t.Errorf("hold-off %s for a deleted PodGroup", wait)
	}
}

func TestElasticSummary(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "w"}
	pods := func(bound, pending int) []*v1.Pod {
		var out []*v1.Pod
		for i := range bound + pending {
			p := gpuPod(fmt.Sprintf("w-%d", i), 1, inGang("w"))
			if i < bound {
				p.Spec.NodeName = "n1"
			}
			out = append(out, p)
		}
		return out
	}
	for _, tc := range []struct {
		bound, pending, min int
		want                string
	}{
		{3, 2, 2, "gang ns/w: quorum 2/2 bound, extras 1/3 bound"},
		{1, 4, 2, "gang ns/w: quorum 1/2 bound, extras 0/3 bound"},
		{5, 0, 2, "gang ns/w: quorum 2/2 bound, extras 3/3 bound"},
	} {
		if got := elasticSummary(key, pods(tc.bound, tc.pending), tc.min); got != tc.want {
			t.Errorf("%d bound, %d pending, min %d: %q, want %q", tc.bound, tc.pending, tc.min, got, tc.want)
		}
	}
}

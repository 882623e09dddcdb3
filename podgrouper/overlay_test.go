package podgrouper

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	testingclock "k8s.io/utils/clock/testing"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// An own write the informer has not shown yet is found by every read, not
// only the first, until the informer shows it, a deletion is seen, or it
// is older than the TTL.
func TestWriteOverlayKeepsOwnWritesAcrossReads(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pg := func(rv string, created time.Time) *schedv1alpha1.PodGroup {
		return &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g", ResourceVersion: rv, CreationTimestamp: metav1.NewTime(created)}}
	}
	newOverlay := func() (*writeOverlay, cache.Store, *testingclock.FakePassiveClock) {
		store := cache.NewStore(cache.MetaNamespaceKeyFunc)
		clk := testingclock.NewFakePassiveClock(now)
		mc := cache.NewIntegerResourceVersionMutationCacheWithOptions(klog.Background(), store, cache.MutationCacheOptions{TTL: time.Minute, IncludeAdds: true, MaxCacheSize: 16})
		return newWriteOverlay(mc, store, 30*time.Second, clk), store, clk
	}
	rvOf := func(t *testing.T, o *writeOverlay) string {
		t.Helper()
		obj, ok, err := o.GetByKey("ns/g")
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return ""
		}
		return obj.(*schedv1alpha1.PodGroup).ResourceVersion
	}

	t.Run("read many times before the informer shows it", func(t *testing.T) {
		o, _, _ := newOverlay()
		o.Mutation(pg("5", now))
		for i := range 3 {
			if got := rvOf(t, o); got != "5" {
				t.Fatalf("read %d: rv %q, want the own write (5)", i+1, got)
			}
		}
	})
	t.Run("the informer shows a newer version", func(t *testing.T) {
		o, store, _ := newOverlay()
		o.Mutation(pg("5", now))
		rvOf(t, o)
		if err := store.Add(pg("7", now)); err != nil {
			t.Fatal(err)
		}
		o.OnAddOrUpdate(pg("7", now))
		if got := rvOf(t, o); got != "7" {
			t.Errorf("rv %q, want the informer's 7", got)
		}
	})
	t.Run("a deletion seen", func(t *testing.T) {
		o, _, _ := newOverlay()
		o.Mutation(pg("5", now))
		rvOf(t, o)
		o.OnDelete(pg("5", now))
		for range 2 {
			if got := rvOf(t, o); got != "" {
				t.Errorf("rv %q after the deletion, want none", got)
			}
		}
	})
	t.Run("older than the TTL: not kept past its read", func(t *testing.T) {
		o, _, clk := newOverlay()
		o.Mutation(pg("5", now))
		clk.SetTime(now.Add(31 * time.Second))
		rvOf(t, o) // the mutation cache's own minute has not run out
		if got := rvOf(t, o); got != "" {
			t.Errorf("rv %q, want none: a write the informer never showed is trusted for the TTL only", got)
		}
	})
}

package podgrouper

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// TestRefWatchRequeues: a referenced object's change requeues exactly the
// roots that named it at their last sync, and a root without pods left is
// forgotten.
func TestRefWatchRequeues(t *testing.T) {
	var requeued []types.UID
	live := map[types.UID]bool{"a": true, "b": true, "c": true}
	w := newRefWatch(nil, func(r types.UID) bool {
		requeued = append(requeued, r)
		return live[r]
	})
	rt := func(ns, name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("trainer.kubeflow.org/v1alpha1")
		u.SetKind("TrainingRuntime")
		u.SetNamespace(ns)
		u.SetName(name)
		return u
	}
	key := func(ns, name string) string { return objKey("TrainingRuntime.trainer.kubeflow.org", ns, name) }
	w.record("a", []string{key("ns", "torch")})
	w.record("b", []string{key("ns", "torch"), key("ns", "jax")})
	w.record("c", []string{key("other", "torch")})

	step := func(what string, obj *unstructured.Unstructured, want ...types.UID) {
		t.Helper()
		requeued = nil
		w.changed(obj)
		slices.Sort(requeued)
		if !slices.Equal(requeued, want) {
			t.Errorf("%s: requeued %v, want %v", what, requeued, want)
		}
	}
	step("shared runtime", rt("ns", "torch"), "a", "b")
	step("another namespace's runtime of the same name", rt("other", "torch"), "c")
	step("unknown object", rt("ns", "none"))
	// a now names another runtime only.
	w.record("a", []string{key("ns", "jax")})
	step("a no longer names torch", rt("ns", "torch"), "b")
	// b's pods are gone: requeued once more, then forgotten.
	live["b"] = false
	step("b without pods", rt("ns", "jax"), "a", "b")
	step("b forgotten", rt("ns", "jax"), "a")
	w.record("a", nil)
	step("a names nothing", rt("ns", "jax"))
	if len(w.byObj) != 1 || len(w.byRoot) != 1 {
		t.Errorf("left: byObj %v byRoot %v, want only c's entry", w.byObj, w.byRoot)
	}
}

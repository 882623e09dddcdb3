package gang

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/muster-io/muster/api"
)

// TestGPUTally: each event leaves the totals a scheduler's cache would
// count — bound, unfinished pods' GPU requests, split by gang membership,
// and the nodes' allocatable GPUs — whatever order updates come in.
func TestGPUTally(t *testing.T) {
	pod := func(uid, node string, gpus int64, gang string, phase v1.PodPhase) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, UID: types.UID(uid), Labels: map[string]string{}},
			Spec:   v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "c"}}},
			Status: v1.PodStatus{Phase: phase}}
		if gpus > 0 {
			p.Spec.Containers[0].Resources.Requests = v1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}
		}
		if gang != "" {
			p.Labels[api.LabelPodGroup] = gang
		}
		return p
	}
	node := func(name string, gpus int64) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: v1.NodeStatus{Allocatable: v1.ResourceList{
			"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI), v1.ResourceCPU: resource.MustParse("8")}}}
	}
	tl := newGPUTally(gpuResourceNames)
	type want struct{ capacity, outside, inGang int64 }
	steps := []struct {
		name string
		do   func()
		want want
	}{
		{"two nodes", func() { tl.node(node("a", 8)); tl.node(node("b", 8)) }, want{16, 0, 0}},
		{"node resized", func() { tl.node(node("b", 4)) }, want{12, 0, 0}},
		{"pending pod counts nothing", func() { tl.pod(pod("m1", "", 4, "g", v1.PodPending)) }, want{12, 0, 0}},
		{"member bound", func() { tl.pod(pod("m1", "a", 4, "g", v1.PodPending)) }, want{12, 0, 4}},
		{"same update twice", func() { tl.pod(pod("m1", "a", 4, "g", v1.PodRunning)) }, want{12, 0, 4}},
		{"lone pod", func() { tl.pod(pod("x", "b", 2, "", v1.PodRunning)) }, want{12, 2, 4}},
		{"cpu-only pod", func() { tl.pod(pod("cpu", "b", 0, "", v1.PodRunning)) }, want{12, 2, 4}},
		{"member finished", func() { tl.pod(pod("m1", "a", 4, "g", v1.PodSucceeded)) }, want{12, 2, 0}},
		{"finished pod deleted", func() { tl.podGone(pod("m1", "a", 4, "g", v1.PodSucceeded)) }, want{12, 2, 0}},
		{"tombstone", func() {
			tl.podGone(cache.DeletedFinalStateUnknown{Key: "x", Obj: pod("x", "b", 2, "", v1.PodRunning)})
		}, want{12, 0, 0}},
		{"member bound again", func() { tl.pod(pod("m2", "a", 4, "g", v1.PodRunning)) }, want{12, 0, 4}},
		{"node gone: its pods hold nothing", func() { tl.nodeGone(node("a", 8)) }, want{4, 0, 0}},
		{"node gone twice", func() { tl.nodeGone(node("a", 8)) }, want{4, 0, 0}},
		{"a pod on a node not known", func() { tl.pod(pod("m3", "c", 2, "g", v1.PodRunning)) }, want{4, 0, 0}},
		{"the node appears", func() { tl.node(node("c", 8)) }, want{12, 0, 2}},
		{"the pod on the gone node deleted", func() { tl.podGone(pod("m2", "a", 4, "g", v1.PodRunning)) }, want{12, 0, 2}},
		{"node a back, empty", func() { tl.node(node("a", 8)) }, want{20, 0, 2}},
		{"unknown object", func() { tl.pod("not a pod"); tl.node(42) }, want{20, 0, 2}},
	}
	for _, s := range steps {
		s.do()
		c, o, g := tl.totals()
		if got := (want{c, o, g}); got != s.want {
			t.Fatalf("%s: got %+v, want %+v", s.name, got, s.want)
		}
	}
}

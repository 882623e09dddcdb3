package podgrouper

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/muster-io/muster/api"
)

func TestPodHandlers(t *testing.T) {
	base := makePod("p", nil, withLabel("a", "1"))
	cases := []struct {
		name string
		mut  func(*corev1.Pod)
		want bool
	}{
		{"status only", func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodRunning
			p.Spec.NodeName = "n1"
			p.ResourceVersion = "2"
		}, false},
		{"label", func(p *corev1.Pod) { p.Labels["a"] = "2" }, true},
		{"annotation", func(p *corev1.Pod) { p.Annotations = map[string]string{"x": "y"} }, true},
		{"owner", func(p *corev1.Pod) { p.OwnerReferences = []metav1.OwnerReference{ownerRef(job)} }, true},
		{"scheduling group", func(p *corev1.Pod) { p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{} }, true},
		{"deleting", func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{} }, true},
		{"our own label write", func(p *corev1.Pod) { p.Labels[api.LabelPodGroup] = "mine" }, false},
		{"pod-group label set by someone else", func(p *corev1.Pod) { p.Labels[api.LabelPodGroup] = "theirs" }, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &Controller{schedulers: map[string]bool{DefaultSchedulerName: true},
				queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())}
			defer c.queue.ShutDown()
			mine := base.DeepCopy()
			mine.Labels[api.LabelPodGroup] = "mine"
			c.written.Store(base.UID, ourMarks(mine))
			n := base.DeepCopy()
			tc.mut(n)
			c.updatePod(base, n)
			if got := c.queue.Len() == 1; got != tc.want {
				t.Errorf("enqueued = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPodFilter(t *testing.T) {
	c := &Controller{schedulers: map[string]bool{"a": true, "b": true}}
	for _, tc := range []struct {
		obj  any
		want bool
	}{
		{makePod("x", nil, func(p *corev1.Pod) { p.Spec.SchedulerName = "a" }), true},
		{makePod("x", nil, func(p *corev1.Pod) { p.Spec.SchedulerName = "b" }), true},
		{makePod("x", nil, func(p *corev1.Pod) { p.Spec.SchedulerName = "default-scheduler" }), false},
		{cache.DeletedFinalStateUnknown{Key: "ns/x", Obj: makePod("x", nil, func(p *corev1.Pod) { p.Spec.SchedulerName = "b" })}, true},
		{&corev1.Node{}, false},
	} {
		if got := c.ours(tc.obj); got != tc.want {
			t.Errorf("ours(%T) = %v, want %v", tc.obj, got, tc.want)
		}
	}
}

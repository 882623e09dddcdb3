package podgrouper

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPodInformerSharesResourceLists: the controller's pod cache drops
// managedFields and holds one map for equal resource lists, and a pod read
// from it holds what the API server holds.
func TestPodInformerSharesResourceLists(t *testing.T) {
	gpu := func(p *corev1.Pod) {
		p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}}
		p.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{"cpu": resource.MustParse("500m"), "nvidia.com/gpu": resource.MustParse("1")},
			Limits:   corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")},
		}}}
	}
	a, b := makePod("a", nil, gpu), makePod("b", nil, gpu)
	w := newWorld(t, testDefs(trainerGang(2)), nil, nil, []*corev1.Pod{a.DeepCopy(), b.DeepCopy()}, nil)

	var cached []*corev1.Pod
	for _, want := range []*corev1.Pod{a, b} {
		got, err := w.ctrl.podLister.Pods(want.Namespace).Get(want.Name)
		if err != nil {
			t.Fatal(err)
		}
		if got.ManagedFields != nil {
			t.Errorf("%s: managedFields kept", got.Name)
		}
		if !equality.Semantic.DeepEqual(got.Spec, want.Spec) {
			t.Errorf("%s: spec changed:\n got %+v\nwant %+v", got.Name, got.Spec, want.Spec)
		}
		cached = append(cached, got)
	}
	same := func(x, y corev1.ResourceList) bool {
		return reflect.ValueOf(x).UnsafePointer() == reflect.ValueOf(y).UnsafePointer()
	}
	ra, rb := cached[0].Spec.Containers[0].Resources, cached[1].Spec.Containers[0].Resources
	if !same(ra.Requests, rb.Requests) || !same(ra.Limits, rb.Limits) {
		t.Error("equal resource lists of two cached pods are separate maps")
	}
}

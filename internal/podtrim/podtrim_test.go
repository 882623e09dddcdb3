package podtrim

import (
	"encoding/json"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func rl(kv ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

func pod(name string, req, lim corev1.ResourceList) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Spec: corev1.PodSpec{
			Containers:     []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: req, Limits: lim}}},
			InitContainers: []corev1.Container{{Name: "i", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "1")}}},
			Overhead:       rl("memory", "10Mi"),
		},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "c", AllocatedResources: rl("cpu", "1"), Resources: &corev1.ResourceRequirements{Limits: rl("cpu", "2")}}}},
	}
}

func same(a, b corev1.ResourceList) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

func TestPodSharesEqualListsOnly(t *testing.T) {
	tests := []struct {
		name       string
		a, b       corev1.ResourceList
		wantShared bool
	}{
		{"equal", rl("cpu", "1", "nvidia.com/gpu", "8"), rl("nvidia.com/gpu", "8", "cpu", "1"), true},
		{"same value, same canonical form", rl("cpu", "1000m"), rl("cpu", "1"), true},
		{"other value", rl("cpu", "1"), rl("cpu", "2"), false},
		{"other name", rl("cpu", "1"), rl("memory", "1"), false},
		{"extra name", rl("cpu", "1"), rl("cpu", "1", "memory", "1"), false},
		{"same bytes, other format", rl("memory", "1Gi"), rl("memory", "1073741824"), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := NewInterner(DefaultMaxLists)
			p1, p2 := pod("a", tc.a, nil), pod("b", tc.b, nil)
			want1, want2 := p1.DeepCopy(), p2.DeepCopy()
			in.Pod(p1)
			in.Pod(p2)
			if got := same(p1.Spec.Containers[0].Resources.Requests, p2.Spec.Containers[0].Resources.Requests); got != tc.wantShared {
				t.Errorf("shared = %v, want %v", got, tc.wantShared)
			}
			// What a reader sees is unchanged: the JSON of each pod.
			for _, c := range []struct{ got, want *corev1.Pod }{{p1, want1}, {p2, want2}} {
				g, err := json.Marshal(c.got)
				if err != nil {
					t.Fatal(err)
				}
				w, err := json.Marshal(c.want)
				if err != nil {
					t.Fatal(err)
				}
				if string(g) != string(w) {
					t.Errorf("pod %s changed:\n got %s\nwant %s", c.got.Name, g, w)
				}
			}
		})
	}
}

func TestPodSharesEveryList(t *testing.T) {
	in := NewInterner(DefaultMaxLists)
	p1 := pod("a", rl("cpu", "1"), rl("cpu", "2"))
	p2 := pod("b", rl("cpu", "1"), rl("cpu", "2"))
	p1.Spec.Resources = &corev1.ResourceRequirements{Requests: rl("cpu", "3")}
	p2.Spec.Resources = &corev1.ResourceRequirements{Requests: rl("cpu", "3")}
	p1.Status.AllocatedResources, p2.Status.AllocatedResources = rl("cpu", "3"), rl("cpu", "3")
	in.Pod(p1)
	in.Pod(p2)
	pairs := map[string][2]corev1.ResourceList{
		"container requests":      {p1.Spec.Containers[0].Resources.Requests, p2.Spec.Containers[0].Resources.Requests},
		"container limits":        {p1.Spec.Containers[0].Resources.Limits, p2.Spec.Containers[0].Resources.Limits},
		"init container requests": {p1.Spec.InitContainers[0].Resources.Requests, p2.Spec.InitContainers[0].Resources.Requests},
		"pod-level requests":      {p1.Spec.Resources.Requests, p2.Spec.Resources.Requests},
		"overhead":                {p1.Spec.Overhead, p2.Spec.Overhead},
		"pod allocated":           {p1.Status.AllocatedResources, p2.Status.AllocatedResources},
		"container allocated":     {p1.Status.ContainerStatuses[0].AllocatedResources, p2.Status.ContainerStatuses[0].AllocatedResources},
		"container status limits": {p1.Status.ContainerStatuses[0].Resources.Limits, p2.Status.ContainerStatuses[0].Resources.Limits},
	}
	for name, pair := range pairs {
		if !same(pair[0], pair[1]) {
			t.Errorf("%s: not shared", name)
		}
	}
	// Equal lists in different places of one pod are one map too.
	if !same(p1.Spec.InitContainers[0].Resources.Requests, p1.Status.ContainerStatuses[0].AllocatedResources) {
		t.Error("equal lists of one pod not shared")
	}
}

func TestEmptyListsStayAsTheyAre(t *testing.T) {
	in := NewInterner(DefaultMaxLists)
	p := pod("a", corev1.ResourceList{}, nil)
	in.Pod(p)
	if r := p.Spec.Containers[0].Resources; r.Requests == nil || len(r.Requests) != 0 || r.Limits != nil {
		t.Errorf("requests %#v limits %#v, want empty and nil", r.Requests, r.Limits)
	}
}

func TestInternerStartsOverWhenFull(t *testing.T) {
	in := NewInterner(2)
	a1, b1, c1 := pod("a", rl("cpu", "1"), nil), pod("b", rl("cpu", "2"), nil), pod("c", rl("cpu", "3"), nil)
	for _, p := range []*corev1.Pod{a1, b1, c1} {
		p.Spec.InitContainers, p.Spec.Overhead, p.Status = nil, nil, corev1.PodStatus{}
		in.Pod(p)
	}
	if len(in.lists) > 2 {
		t.Fatalf("remembers %d lists, max 2", len(in.lists))
	}
	c2 := pod("c2", rl("cpu", "3"), nil)
	in.Pod(c2)
	if !same(c1.Spec.Containers[0].Resources.Requests, c2.Spec.Containers[0].Resources.Requests) {
		t.Error("the list remembered after starting over is not shared")
	}
}

func TestTransform(t *testing.T) {
	in := NewInterner(DefaultMaxLists)
	p := pod("a", rl("cpu", "1"), nil)
	got, err := in.Transform(p)
	if err != nil || got != any(p) {
		t.Fatalf("Transform = %v, %v; want the same pod", got, err)
	}
	if p.ManagedFields != nil {
		t.Error("managedFields kept")
	}
	gone := pod("b", rl("cpu", "1"), nil)
	d := cache.DeletedFinalStateUnknown{Key: "ns/b", Obj: gone}
	if got, err := in.Transform(d); err != nil || got != any(d) {
		t.Fatalf("Transform(tombstone) = %v, %v", got, err)
	}
	if gone.ManagedFields != nil || !same(gone.Spec.Containers[0].Resources.Requests, p.Spec.Containers[0].Resources.Requests) {
		t.Error("tombstone's pod not trimmed")
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "x"}}}}
	if _, err := in.Transform(node); err != nil || node.ManagedFields != nil {
		t.Errorf("node: err %v, managedFields %v", err, node.ManagedFields)
	}
	if got, err := in.Transform("not an object"); err != nil || got != "not an object" {
		t.Errorf("Transform(string) = %v, %v", got, err)
	}
}

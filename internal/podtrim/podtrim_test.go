package podtrim

import (
	"encoding/json"
	"fmt"
	"k8s.io/apimachinery/pkg/types"
	"reflect"
	"strings"
	"testing"
	"unsafe"

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

func ptr[T any](v T) *T { return &v }

// workloadPod is a pod as the API server returns it for one member of a
// workload: name and UID are its own, the rest comes from the template.
func workloadPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: string([]byte("team-a")), UID: "uid-" + types.UID(name),
			Labels:          map[string]string{"app": "train", "role": string([]byte("worker"))},
			Annotations:     map[string]string{"note": "x"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: string([]byte("Job")), Name: "j", UID: "j-uid"}},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "c", Image: string([]byte("registry.example/train:1")), ImagePullPolicy: corev1.PullIfNotPresent,
				TerminationMessagePath: "/dev/termination-log",
				Resources:              corev1.ResourceRequirements{Requests: rl("nvidia.com/gpu", "1")},
			}},
			NodeSelector:     map[string]string{"pool": "gpu"},
			Tolerations:      []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}, {Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr[int64](300)}},
			SecurityContext:  &corev1.PodSecurityContext{},
			SchedulerName:    string([]byte("muster")),
			PreemptionPolicy: ptr(corev1.PreemptLowerPriority),
		},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: string([]byte("Unschedulable"))}}},
	}
}

func samePtr[T any](a, b T) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

func sameString(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

func TestPodSharesEqualParts(t *testing.T) {
	tests := []struct {
		name   string
		change func(p *corev1.Pod)
		shared func(a, b *corev1.Pod) bool
		want   bool
	}{
		{"labels", nil, func(a, b *corev1.Pod) bool { return samePtr(a.Labels, b.Labels) }, true},
		{"other labels", func(p *corev1.Pod) { p.Labels = map[string]string{"app": "train", "role": "launcher"} },
			func(a, b *corev1.Pod) bool { return samePtr(a.Labels, b.Labels) }, false},
		{"other labels still share keys", func(p *corev1.Pod) { p.Labels = map[string]string{string([]byte("app")): "serve"} },
			func(a, b *corev1.Pod) bool {
				for k := range b.Labels {
					for k2 := range a.Labels {
						if k == k2 {
							return sameString(k, k2)
						}
					}
				}
				return false
			}, true},
		{"annotations", nil, func(a, b *corev1.Pod) bool { return samePtr(a.Annotations, b.Annotations) }, true},
		{"node selector", nil, func(a, b *corev1.Pod) bool { return samePtr(a.Spec.NodeSelector, b.Spec.NodeSelector) }, true},
		{"tolerations", nil, func(a, b *corev1.Pod) bool { return samePtr(a.Spec.Tolerations, b.Spec.Tolerations) }, true},
		{"tolerations, other seconds", func(p *corev1.Pod) { p.Spec.Tolerations[1].TolerationSeconds = ptr[int64](30) },
			func(a, b *corev1.Pod) bool { return samePtr(a.Spec.Tolerations, b.Spec.Tolerations) }, false},
		{"tolerations, no seconds", func(p *corev1.Pod) { p.Spec.Tolerations[1].TolerationSeconds = nil },
			func(a, b *corev1.Pod) bool { return samePtr(a.Spec.Tolerations, b.Spec.Tolerations) }, false},
		{"empty security context", nil, func(a, b *corev1.Pod) bool { return a.Spec.SecurityContext == b.Spec.SecurityContext }, true},
		{"set security context", func(p *corev1.Pod) { p.Spec.SecurityContext.RunAsUser = ptr[int64](1000) },
			func(a, b *corev1.Pod) bool { return a.Spec.SecurityContext == b.Spec.SecurityContext }, false},
		{"preemption policy", nil, func(a, b *corev1.Pod) bool { return a.Spec.PreemptionPolicy == b.Spec.PreemptionPolicy }, true},
		{"namespace", nil, func(a, b *corev1.Pod) bool { return sameString(a.Namespace, b.Namespace) }, true},
		{"owner kind", nil, func(a, b *corev1.Pod) bool { return sameString(a.OwnerReferences[0].Kind, b.OwnerReferences[0].Kind) }, true},
		{"image", nil, func(a, b *corev1.Pod) bool { return sameString(a.Spec.Containers[0].Image, b.Spec.Containers[0].Image) }, true},
		{"scheduler name", nil, func(a, b *corev1.Pod) bool { return sameString(a.Spec.SchedulerName, b.Spec.SchedulerName) }, true},
		{"condition reason", nil, func(a, b *corev1.Pod) bool {
			return sameString(a.Status.Conditions[0].Reason, b.Status.Conditions[0].Reason)
		}, true},
		{"names stay the pod's own", nil, func(a, b *corev1.Pod) bool { return a.Name == b.Name }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := NewInterner(DefaultMaxLists)
			a, b := workloadPod("a"), workloadPod("b")
			if tc.change != nil {
				tc.change(b)
			}
			wantA, wantB := a.DeepCopy(), b.DeepCopy()
			in.Pod(a)
			in.Pod(b)
			if got := tc.shared(a, b); got != tc.want {
				t.Errorf("shared = %v, want %v", got, tc.want)
			}
			// What a reader sees is unchanged.
			if !reflect.DeepEqual(a, wantA) || !reflect.DeepEqual(b, wantB) {
				t.Errorf("pods changed:\n got %+v\nwant %+v", b, wantB)
			}
		})
	}
}

// A hash that two unequal values share must not make them one.
func TestPodDoesNotShareOnHashCollision(t *testing.T) {
	in := NewInterner(DefaultMaxLists)
	a, b := workloadPod("a"), workloadPod("b")
	b.Labels = map[string]string{"other": "labels"}
	b.Spec.Tolerations = []corev1.Toleration{{Key: "other"}}
	in.Pod(a)
	// Put a's values under the hashes of b's.
	in.strMaps[in.strMapHash(b.Labels)] = a.Labels
	in.tolerations[in.tolerationsHash(b.Spec.Tolerations)] = a.Spec.Tolerations
	want := b.DeepCopy()
	in.Pod(b)
	if !reflect.DeepEqual(b, want) {
		t.Errorf("b changed:\n got %+v\nwant %+v", b, want)
	}
}

func TestInternerBoundsEveryKind(t *testing.T) {
	in := NewInterner(3)
	for i := range 10 {
		p := workloadPod(fmt.Sprint("p", i))
		p.Namespace = fmt.Sprint("ns", i)
		p.Labels = map[string]string{"i": fmt.Sprint(i)}
		p.Spec.Tolerations[0].Key = fmt.Sprint("t", i)
		p.Spec.Containers[0].Resources.Requests = rl("cpu", fmt.Sprint(i+1))
		in.Pod(p)
	}
	for name, n := range map[string]int{"lists": len(in.lists), "string maps": len(in.strMaps), "tolerations": len(in.tolerations), "strings": len(in.strs)} {
		if n > 3 {
			t.Errorf("%s: remembers %d, max 3", name, n)
		}
	}
	long := workloadPod("long")
	long.Annotations = map[string]string{"big": strings.Repeat("x", maxString+1)}
	in.Pod(long)
	for s := range in.strs {
		if len(s) > maxString {
			t.Errorf("remembers a string of %d bytes", len(s))
		}
	}
}

// Package podtrim shrinks the pods an informer keeps, without dropping
// anything a reader may look at. The pod-grouper's definitions may read any
// field of a pod and kube-scheduler's plugins read most of them, so fields
// cannot be left out; what can go is repetition. Every pod of a workload
// carries the same resource lists, and a Go map of one to three quantities
// costs more than half a kilobyte, twice per container: at 50 000 pods that
// is a tenth of each binary's heap. The transform makes equal lists one map.
//
// Sharing is safe because informer objects are read-only by contract:
// client-go hands the same object to every handler and lister, and whoever
// changes a pod copies it first (DeepCopy makes new maps).
package podtrim

import (
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/cache"
)

// DefaultMaxLists bounds the distinct resource lists an Interner remembers:
// a cluster has far fewer request shapes than pods; past this many the
// Interner starts over (pods keep what they share) rather than grow.
const DefaultMaxLists = 4096

// Interner replaces each resource list of a pod with an equal one it has
// seen before. It is safe for concurrent use.
type Interner struct {
	max   int
	mu    sync.Mutex
	lists map[string]corev1.ResourceList
}

// NewInterner returns an Interner that remembers up to max lists.
func NewInterner(max int) *Interner {
	return &Interner{max: max, lists: map[string]corev1.ResourceList{}}
}

// Transform is a cache.TransformFunc: it drops managedFields (as
// kube-scheduler's own pod informer does; nothing reads them from a cache)
// from any object and shares the resource lists of pods.
func (in *Interner) Transform(obj any) (any, error) {
	target := obj
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		target = d.Obj
	}
	if a, err := meta.Accessor(target); err == nil && a.GetManagedFields() != nil {
		a.SetManagedFields(nil)
	}
	if p, ok := target.(*corev1.Pod); ok {
		in.Pod(p)
	}
	return obj, nil
}

// Pod shares every resource list of p: containers' requests and limits
// (init and ephemeral ones too), the pod-level ones, the overhead, and the
// allocated and actual resources in the status.
func (in *Interner) Pod(p *corev1.Pod) {
	in.mu.Lock()
	defer in.mu.Unlock()
	for i := range p.Spec.Containers {
		in.requirements(&p.Spec.Containers[i].Resources)
	}
	for i := range p.Spec.InitContainers {
		in.requirements(&p.Spec.InitContainers[i].Resources)
	}
	for i := range p.Spec.EphemeralContainers {
		in.requirements(&p.Spec.EphemeralContainers[i].Resources)
	}
	if p.Spec.Resources != nil {
		in.requirements(p.Spec.Resources)
	}
	p.Spec.Overhead = in.list(p.Spec.Overhead)
	p.Status.AllocatedResources = in.list(p.Status.AllocatedResources)
	if p.Status.Resources != nil {
		in.requirements(p.Status.Resources)
	}
	for _, statuses := range [][]corev1.ContainerStatus{p.Status.ContainerStatuses, p.Status.InitContainerStatuses, p.Status.EphemeralContainerStatuses} {
		for i := range statuses {
			statuses[i].AllocatedResources = in.list(statuses[i].AllocatedResources)
			if statuses[i].Resources != nil {
				in.requirements(statuses[i].Resources)
			}
		}
	}
}

func (in *Interner) requirements(r *corev1.ResourceRequirements) {
	r.Limits = in.list(r.Limits)
	r.Requests = in.list(r.Requests)
}

// list returns the remembered list equal to l, or remembers l. Equal means
// the same names with quantities of the same canonical string and format:
// every method of a Quantity (String, Cmp, Value, the JSON and protobuf
// forms) answers from those, so no reader can tell the two lists apart.
// A nil or empty list stays as it is (nil and empty differ to a reader).
func (in *Interner) list(l corev1.ResourceList) corev1.ResourceList {
	if len(l) == 0 {
		return l
	}
	k := key(l)
	if shared, ok := in.lists[k]; ok {
		return shared
	}
	if len(in.lists) >= in.max {
		clear(in.lists)
	}
	in.lists[k] = l
	return l
}

func key(l corev1.ResourceList) string {
	names := make([]string, 0, len(l))
	for n := range l {
		names = append(names, string(n))
	}
	slices.Sort(names)
	var b strings.Builder
	for _, n := range names {
		q := l[corev1.ResourceName(n)]
		// A name cannot hold NUL nor a quantity's string '\x01'.
		b.WriteString(n)
		b.WriteByte(0)
		b.WriteString(q.String())
		b.WriteByte(0)
		b.WriteString(string(q.Format))
		b.WriteByte(1)
	}
	return b.String()
}

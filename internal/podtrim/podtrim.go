// Package podtrim shrinks the pods an informer keeps, without dropping
// anything a reader may look at. The pod-grouper's definitions may read any
// field of a pod and kube-scheduler's plugins read most of them, so fields
// cannot be left out; what can go is repetition. The pods of a workload
// carry the same resource lists, tolerations, node selector and labels, and
// the same few strings (namespace, image, policies), and the protobuf
// decoder gives every pod its own copy of each: at 50 000 pods the
// repetition was a third of kube-scheduler's heap. The transform makes equal
// parts one value.
//
// Sharing is safe because informer objects are read-only by contract:
// client-go hands the same object to every handler and lister, and whoever
// changes a pod copies it first (DeepCopy makes new maps and slices).
package podtrim

import (
	"hash/maphash"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/cache"
)

// DefaultMaxLists bounds the distinct values of each kind (resource lists,
// string maps, tolerations, strings) an Interner remembers: a cluster has
// far fewer shapes than pods; past this many the Interner starts over for
// that kind (pods keep what they share) rather than grow.
const DefaultMaxLists = 4096

// maxString is the longest string an Interner remembers: the fields it
// shares (names, policies, label keys and values) are short, and a long
// annotation value is rarely repeated.
const maxString = 256

// Interner replaces parts of a pod with equal ones it has seen before. It
// is safe for concurrent use.
type Interner struct {
	max  int
	mu   sync.Mutex
	seed maphash.Seed
	// Resource lists are keyed by their content; the other kinds by a hash
	// of it and compared in full on a hit, so the tables hold no second
	// copy of what they share.
	lists       map[string]corev1.ResourceList
	strMaps     map[uint64]map[string]string
	tolerations map[uint64][]corev1.Toleration
	strs        map[string]string
	preemption  map[corev1.PreemptionPolicy]*corev1.PreemptionPolicy
	keys        []string // scratch
	emptySC     *corev1.PodSecurityContext
}

// NewInterner returns an Interner that remembers up to max values of each kind.
func NewInterner(max int) *Interner {
	return &Interner{
		max:         max,
		seed:        maphash.MakeSeed(),
		lists:       map[string]corev1.ResourceList{},
		strMaps:     map[uint64]map[string]string{},
		tolerations: map[uint64][]corev1.Toleration{},
		strs:        map[string]string{},
		preemption:  map[corev1.PreemptionPolicy]*corev1.PreemptionPolicy{},
		emptySC:     &corev1.PodSecurityContext{},
	}
}

// Transform is a cache.TransformFunc: it drops managedFields (as
// kube-scheduler's own pod informer does; nothing reads them from a cache)
// from any object and shares the repeated parts of pods.
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

// Pod shares the repeated parts of p: every resource list (containers'
// requests and limits, init and ephemeral ones too, the pod-level ones, the
// overhead, the allocated and actual resources in the status), the labels,
// annotations and node selector, the tolerations, an empty security
// context, and the strings that name shared things (namespace, owner kinds,
// images, policies, condition types).
func (in *Interner) Pod(p *corev1.Pod) {
	in.mu.Lock()
	defer in.mu.Unlock()
	p.Namespace = in.str(p.Namespace)
	p.Labels = in.strMap(p.Labels)
	p.Annotations = in.strMap(p.Annotations)
	for i := range p.OwnerReferences {
		o := &p.OwnerReferences[i]
		o.APIVersion, o.Kind = in.str(o.APIVersion), in.str(o.Kind)
	}

	s := &p.Spec
	for _, cs := range [][]corev1.Container{s.Containers, s.InitContainers} {
		for i := range cs {
			in.container(&cs[i])
		}
	}
	for i := range s.EphemeralContainers {
		in.container((*corev1.Container)(&s.EphemeralContainers[i].EphemeralContainerCommon))
	}
	if s.Resources != nil {
		in.requirements(s.Resources)
	}
	s.Overhead = in.list(s.Overhead)
	s.NodeSelector = in.strMap(s.NodeSelector)
	s.Tolerations = in.tolerationList(s.Tolerations)
	if s.SecurityContext != nil && reflect.ValueOf(*s.SecurityContext).IsZero() {
		s.SecurityContext = in.emptySC
	}
	s.SchedulerName, s.ServiceAccountName, s.DeprecatedServiceAccount = in.str(s.SchedulerName), in.str(s.ServiceAccountName), in.str(s.DeprecatedServiceAccount)
	s.RestartPolicy, s.DNSPolicy, s.PriorityClassName = corev1.RestartPolicy(in.str(string(s.RestartPolicy))), corev1.DNSPolicy(in.str(string(s.DNSPolicy))), in.str(s.PriorityClassName)
	if s.PreemptionPolicy != nil {
		s.PreemptionPolicy = in.preemptionPolicy(*s.PreemptionPolicy)
	}

	st := &p.Status
	st.Phase, st.QOSClass = corev1.PodPhase(in.str(string(st.Phase))), corev1.PodQOSClass(in.str(string(st.QOSClass)))
	for i := range st.Conditions {
		c := &st.Conditions[i]
		c.Type, c.Status, c.Reason = corev1.PodConditionType(in.str(string(c.Type))), corev1.ConditionStatus(in.str(string(c.Status))), in.str(c.Reason)
	}
	st.AllocatedResources = in.list(st.AllocatedResources)
	if st.Resources != nil {
		in.requirements(st.Resources)
	}
	for _, statuses := range [][]corev1.ContainerStatus{st.ContainerStatuses, st.InitContainerStatuses, st.EphemeralContainerStatuses} {
		for i := range statuses {
			cs := &statuses[i]
			cs.Name, cs.Image, cs.ImageID = in.str(cs.Name), in.str(cs.Image), in.str(cs.ImageID)
			cs.AllocatedResources = in.list(cs.AllocatedResources)
			if cs.Resources != nil {
				in.requirements(cs.Resources)
			}
		}
	}
}

func (in *Interner) container(c *corev1.Container) {
	c.Name, c.Image = in.str(c.Name), in.str(c.Image)
	c.ImagePullPolicy = corev1.PullPolicy(in.str(string(c.ImagePullPolicy)))
	c.TerminationMessagePath = in.str(c.TerminationMessagePath)
	c.TerminationMessagePolicy = corev1.TerminationMessagePolicy(in.str(string(c.TerminationMessagePolicy)))
	in.requirements(&c.Resources)
}

func (in *Interner) requirements(r *corev1.ResourceRequirements) {
	r.Limits = in.list(r.Limits)
	r.Requests = in.list(r.Requests)
}

// str returns the remembered string equal to s, or remembers s.
func (in *Interner) str(s string) string {
	if s == "" || len(s) > maxString {
		return s
	}
	return lookupOrRemember(in.strs, in.max, s, func() string { return s })
}

// lookupOrRemember returns m[k], or remembers and returns the value made
// by v, starting m over when it holds max entries.
func lookupOrRemember[K comparable, V any](m map[K]V, max int, k K, v func() V) V {
	if shared, ok := m[k]; ok {
		return shared
	}
	if len(m) >= max {
		clear(m)
	}
	made := v()
	m[k] = made
	return made
}

func (in *Interner) preemptionPolicy(v corev1.PreemptionPolicy) *corev1.PreemptionPolicy {
	return lookupOrRemember(in.preemption, in.max, v, func() *corev1.PreemptionPolicy { return &v })
}

// strMap returns the remembered map equal to m, or remembers m with its
// keys and values shared. A nil or empty map stays as it is.
func (in *Interner) strMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	h := in.strMapHash(m)
	if shared, ok := in.strMaps[h]; ok && maps.Equal(shared, m) {
		return shared
	}
	// Assigning to a key that exists stores the given key string too, so
	// this shares the keys without growing the map.
	in.keys = in.keys[:0]
	for k := range m {
		in.keys = append(in.keys, k)
	}
	for _, k := range in.keys {
		m[in.str(k)] = in.str(m[k])
	}
	clear(in.keys)
	if len(in.strMaps) >= in.max {
		clear(in.strMaps)
	}
	in.strMaps[h] = m
	return m
}

// tolerationList returns the remembered list equal to ts, or remembers ts.
// A nil or empty list stays as it is.
func (in *Interner) tolerationList(ts []corev1.Toleration) []corev1.Toleration {
	if len(ts) == 0 {
		return ts
	}
	h := in.tolerationsHash(ts)
	if shared, ok := in.tolerations[h]; ok && slices.EqualFunc(shared, ts, sameToleration) {
		return shared
	}
	if len(in.tolerations) >= in.max {
		clear(in.tolerations)
	}
	in.tolerations[h] = ts
	return ts
}

func (in *Interner) strMapHash(m map[string]string) uint64 {
	// A sum of the entries' hashes does not depend on the map's order.
	var h uint64
	for k, v := range m {
		h += maphash.String(in.seed, k) ^ maphash.String(in.seed, v)*0x9e3779b97f4a7c15
	}
	return h
}

func (in *Interner) tolerationsHash(ts []corev1.Toleration) uint64 {
	var mh maphash.Hash
	mh.SetSeed(in.seed)
	for _, t := range ts {
		mh.WriteString(t.Key)
		mh.WriteByte(0)
		mh.WriteString(string(t.Operator))
		mh.WriteByte(0)
		mh.WriteString(t.Value)
		mh.WriteByte(0)
		mh.WriteString(string(t.Effect))
		mh.WriteByte(0)
		if t.TolerationSeconds != nil {
			maphash.WriteComparable(&mh, *t.TolerationSeconds)
		}
		mh.WriteByte(1)
	}
	return mh.Sum64()
}

// sameToleration is equality as a reader sees it: the seconds compared by
// value, nil apart from any value.
func sameToleration(a, b corev1.Toleration) bool {
	if a.Key != b.Key || a.Operator != b.Operator || a.Value != b.Value || a.Effect != b.Effect {
		return false
	}
	if (a.TolerationSeconds == nil) != (b.TolerationSeconds == nil) {
		return false
	}
	return a.TolerationSeconds == nil || *a.TolerationSeconds == *b.TolerationSeconds
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
	return lookupOrRemember(in.lists, in.max, key(l), func() corev1.ResourceList { return l })
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

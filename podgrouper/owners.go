package podgrouper

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilcache "k8s.io/apimachinery/pkg/util/cache"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/klog/v2"
)

// DefaultMaxOwnerDepth bounds the owner walk. The deepest real chain known is
// LeaderWorkerSet's worker pod → StatefulSet → leader pod → StatefulSet →
// LeaderWorkerSet (4 hops); 10 leaves room for wrappers above.
const DefaultMaxOwnerDepth = 10

// ownerCacheTTL bounds how long an owner's metadata is reused. Controller
// owner references of intermediate objects (Jobs, ReplicaSets, StatefulSets)
// almost never change after creation; the TTL only limits the memory held for
// workloads that are gone.
const ownerCacheTTL = 2 * time.Minute

var podGVK = corev1.SchemeGroupVersion.WithKind("Pod")

// errOwnerGone means an owner in the chain does not exist or has another UID
// (deleted and re-created). The pod is probably being garbage-collected; the
// sync is retried with backoff in case the cache was behind.
var errOwnerGone = errors.New("owner is gone")

// link is one object of an owner chain.
type link struct {
	GVK       schema.GroupVersionKind
	GVR       schema.GroupVersionResource
	Namespace string // "" for cluster-scoped objects
	Name      string
	UID       types.UID
	// Annotations of the object (kept for the workload's opt-out and
	// overrides; the root object itself is read in full when needed).
	Annotations map[string]string
	controller  *metav1.OwnerReference
}

// ref is the object reference events about the object are recorded on.
func (l link) ref() *corev1.ObjectReference {
	apiVersion, kind := l.GVK.ToAPIVersionAndKind()
	return &corev1.ObjectReference{APIVersion: apiVersion, Kind: kind, Namespace: l.Namespace, Name: l.Name, UID: l.UID}
}

func (l link) String() string {
	if l.Namespace == "" {
		return l.GVK.Kind + "/" + l.Name
	}
	return l.GVK.Kind + "/" + l.Namespace + "/" + l.Name
}

// owners walks controller owner references with metadata-only reads.
type owners struct {
	mapper   meta.RESTMapper
	metadata metadata.Interface
	// pods serves owners that are pods (LeaderWorkerSet leader pods) from the
	// informer cache before falling back to the metadata client.
	pods     corelisters.PodLister
	maxDepth int
	// cache maps an owner's UID to its metadata. Keyed by UID, a hit is
	// UID-checked by construction.
	cache *utilcache.LRUExpireCache
}

func newOwners(mapper meta.RESTMapper, md metadata.Interface, pods corelisters.PodLister, maxDepth int) *owners {
	if maxDepth <= 0 {
		maxDepth = DefaultMaxOwnerDepth
	}
	return &owners{mapper: mapper, metadata: md, pods: pods, maxDepth: maxDepth, cache: utilcache.NewLRUExpireCache(8192)}
}

// chain returns pod followed by its controller owners, bottom up, at most
// maxDepth owners. It stops at an object without a controller reference.
func (o *owners) chain(ctx context.Context, pod *corev1.Pod) ([]link, error) {
	out := []link{{
		GVK: podGVK, GVR: corev1.SchemeGroupVersion.WithResource("pods"),
		Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
		Annotations: pod.Annotations, controller: metav1.GetControllerOfNoCopy(pod),
	}}
	seen := map[types.UID]bool{pod.UID: true}
	for len(out) <= o.maxDepth {
		cur := out[len(out)-1]
		ref := cur.controller
		if ref == nil {
			return out, nil
		}
		if seen[ref.UID] {
			return nil, fmt.Errorf("owner chain of pod %s/%s loops at %s %s", pod.Namespace, pod.Name, ref.Kind, ref.Name)
		}
		seen[ref.UID] = true
		next, err := o.get(ctx, cur.Namespace, ref)
		if meta.IsNoMatchError(err) {
			// A kind the API server does not serve (a stale reference to a
			// removed CRD) cannot exist, so it has no definition either:
			// the chain ends below it.
			klog.FromContext(ctx).V(2).Info("Owner kind not served; owner walk stops", "pod", klog.KObj(pod), "owner", ref.Kind)
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("walking owners of pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		out = append(out, next)
	}
	return out, nil
}

// get returns the metadata of the owner ref names, seen from an object in
// namespace ns. A missing owner or one with another UID is errOwnerGone.
func (o *owners) get(ctx context.Context, ns string, ref *metav1.OwnerReference) (link, error) {
	if v, ok := o.cache.Get(ref.UID); ok {
		return v.(link), nil
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return link{}, fmt.Errorf("owner reference %s %s: apiVersion %q: %w", ref.Kind, ref.Name, ref.APIVersion, err)
	}
	gvk := gv.WithKind(ref.Kind)
	mapping, err := o.mapping(gvk)
	if err != nil {
		return link{}, err
	}
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		ns = ""
	}
	var m metav1.Object
	if gvk.GroupKind() == podGVK.GroupKind() && o.pods != nil {
		if p, err := o.pods.Pods(ns).Get(ref.Name); err == nil && p.UID == ref.UID {
			m = p
		}
	}
	if m == nil {
		pom, err := o.metadata.Resource(mapping.Resource).Namespace(ns).Get(ctx, ref.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return link{}, fmt.Errorf("%s %s: %w", ref.Kind, ref.Name, errOwnerGone)
		}
		if err != nil {
			return link{}, fmt.Errorf("reading %s %s: %w", ref.Kind, ref.Name, err)
		}
		m = pom
	}
	if m.GetUID() != ref.UID {
		// Same name, another object: the owner the reference means is gone.
		return link{}, fmt.Errorf("%s %s has uid %s, reference wants %s: %w", ref.Kind, ref.Name, m.GetUID(), ref.UID, errOwnerGone)
	}
	l := link{
		GVK: gvk, GVR: mapping.Resource, Namespace: ns, Name: m.GetName(), UID: m.GetUID(),
		Annotations: m.GetAnnotations(),
	}
	if c := metav1.GetControllerOfNoCopy(m); c != nil {
		c := *c
		l.controller = &c
	}
	o.cache.Add(ref.UID, l, ownerCacheTTL)
	return l, nil
}

// mapping maps a kind to its resource. A kind the mapper does not know may
// come from a CRD installed after the last discovery: reset the mapper once
// and ask again, as the garbage collector does.
func (o *owners) mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	m, err := o.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil && meta.IsNoMatchError(err) {
		if r, ok := o.mapper.(meta.ResettableRESTMapper); ok {
			r.Reset()
			m, err = o.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("mapping kind %s to a resource: %w", gvk, err)
	}
	return m, nil
}

// forget drops a cached owner, after it was deleted.
func (o *owners) forget(uid types.UID) { o.cache.Remove(uid) }

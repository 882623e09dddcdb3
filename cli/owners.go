package cli

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
)

// maxOwnerDepth bounds an owner chain walk. Real chains are short (pod →
// Job → JobSet → TrainJob is 3); the bound stops a cycle of broken
// references from looping.
const maxOwnerDepth = 10

// ownerLookup returns the object a controller reference points to, nil when
// it does not exist (any more).
type ownerLookup func(ctx context.Context, namespace string, ref metav1.OwnerReference) (metav1.Object, error)

// ownerWalker follows controller owner references upwards. It remembers the
// controller reference of every object it has seen, so the pods of one Job
// cost one lookup together, not one each.
type ownerWalker struct {
	lookup ownerLookup
	// parent maps an object's UID to its controller reference (nil for a
	// top object, or for one that could not be found).
	parent map[types.UID]*metav1.OwnerReference
}

func newOwnerWalker(lookup ownerLookup) *ownerWalker {
	return &ownerWalker{lookup: lookup, parent: map[types.UID]*metav1.OwnerReference{}}
}

// remember records obj's controller reference, for objects already in hand
// (pods listed anyway, the workload itself).
func (w *ownerWalker) remember(obj metav1.Object) {
	w.parent[obj.GetUID()] = metav1.GetControllerOfNoCopy(obj)
}

// chain returns the UIDs of obj's controller owners, nearest first.
func (w *ownerWalker) chain(ctx context.Context, obj metav1.Object) ([]types.UID, error) {
	refs, err := w.refs(ctx, obj)
	out := make([]types.UID, len(refs))
	for i, r := range refs {
		out[i] = r.UID
	}
	return out, err
}

// refs returns obj's controller owner references, nearest first.
func (w *ownerWalker) refs(ctx context.Context, obj metav1.Object) ([]*metav1.OwnerReference, error) {
	var out []*metav1.OwnerReference
	ref := metav1.GetControllerOfNoCopy(obj)
	ns := obj.GetNamespace()
	for depth := 0; ref != nil && depth < maxOwnerDepth; depth++ {
		out = append(out, ref)
		next, known := w.parent[ref.UID]
		if !known {
			owner, err := w.lookup(ctx, ns, *ref)
			if err != nil {
				return out, err
			}
			// A reference whose UID does not match points to an object
			// that was deleted and recreated under the same name: the
			// chain ends here, as the garbage collector sees it.
			if owner == nil || owner.GetUID() != ref.UID {
				w.parent[ref.UID] = nil
				return out, nil
			}
			next = metav1.GetControllerOfNoCopy(owner)
			w.parent[ref.UID] = next
		}
		ref = next
	}
	return out, nil
}

// reaches reports whether target is among obj's controller owners.
func (w *ownerWalker) reaches(ctx context.Context, obj metav1.Object, target types.UID) (bool, error) {
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil {
		return false, nil
	}
	if ref.UID == target {
		return true, nil
	}
	uids, err := w.chain(ctx, obj)
	for _, u := range uids {
		if u == target {
			return true, nil
		}
	}
	return false, err
}

// ownerIndex looks owners up in the cluster. It lists each owner kind once
// per namespace and indexes the result by UID, so a workload of a thousand
// pods over hundreds of Jobs costs one list of Jobs, not a GET per Job.
// Owners are listed as metadata only: the walk reads nothing but UIDs and
// owner references, and full objects (a Job carries its pod template)
// cost the server and the client many times more to encode and decode.
type ownerIndex struct {
	c *Cluster

	mu     sync.Mutex
	listed map[ownerListKey]*ownerListing
	// mappings caches the RESTMapping of each owner apiVersion and kind
	// (nil: not served): every owner of a kind asks the same, and the
	// mapper answers slowly.
	mappings map[ownerKind]*meta.RESTMapping
}

type ownerKind struct{ apiVersion, kind string }

type ownerListKey struct {
	gk schema.GroupKind
	ns string
}

// ownerListing is one list of one owner kind, filled once; done closes
// when idx and err are set, so a lookup can wait for a prefetch in flight.
type ownerListing struct {
	done chan struct{}
	idx  map[types.UID]metav1.Object
	err  error
}

func newOwnerIndex(c *Cluster) *ownerIndex {
	return &ownerIndex{c: c, listed: map[ownerListKey]*ownerListing{}, mappings: map[ownerKind]*meta.RESTMapping{}}
}

// clusterOwnerLookup is the ownerLookup of a fresh ownerIndex on c.
func clusterOwnerLookup(c *Cluster) ownerLookup {
	return newOwnerIndex(c).lookup
}

// prefetch starts listing the kinds (in namespace) in the background, so
// the lists run while the caller still waits for other requests (pods).
// Kinds the cluster does not serve are skipped; a failed list is reported
// only if a lookup needs that kind.
func (x *ownerIndex) prefetch(ctx context.Context, namespace string, kinds []schema.GroupVersionKind) {
	for _, gvk := range kinds {
		m, err := x.c.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			continue
		}
		if l, start := x.listing(m, namespace); start {
			go x.fill(ctx, l, m, namespace)
		}
	}
}

// listing returns the listing of m's kind in namespace, and whether the
// caller is the one to fill it.
func (x *ownerIndex) listing(m *meta.RESTMapping, namespace string) (*ownerListing, bool) {
	k := ownerListKey{gk: m.GroupVersionKind.GroupKind(), ns: namespace}
	if m.Scope.Name() != meta.RESTScopeNameNamespace {
		k.ns = ""
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if l, ok := x.listed[k]; ok {
		return l, false
	}
	l := &ownerListing{done: make(chan struct{})}
	x.listed[k] = l
	return l, true
}

func (x *ownerIndex) fill(ctx context.Context, l *ownerListing, m *meta.RESTMapping, namespace string) {
	defer close(l.done)
	if m.Scope.Name() != meta.RESTScopeNameNamespace {
		namespace = ""
	}
	l.idx, l.err = x.list(ctx, m.Resource, namespace)
	if l.err != nil {
		l.err = apiError(fmt.Sprintf("list %s to follow owner references", m.Resource.Resource), l.err)
	}
}

// list reads the objects of one resource as metadata, through the
// metadata client when there is one (the dynamic client otherwise, as in
// tests with fake clients).
func (x *ownerIndex) list(ctx context.Context, gvr schema.GroupVersionResource, namespace string) (map[types.UID]metav1.Object, error) {
	if x.c.Metadata != nil {
		var ri metadata.ResourceInterface = x.c.Metadata.Resource(gvr)
		if namespace != "" {
			ri = x.c.Metadata.Resource(gvr).Namespace(namespace)
		}
		l, err := ri.List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		idx := make(map[types.UID]metav1.Object, len(l.Items))
		for i := range l.Items {
			idx[l.Items[i].UID] = &l.Items[i]
		}
		return idx, nil
	}
	var ri dynamic.ResourceInterface = x.c.Dynamic.Resource(gvr)
	if namespace != "" {
		ri = x.c.Dynamic.Resource(gvr).Namespace(namespace)
	}
	l, err := ri.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	idx := make(map[types.UID]metav1.Object, len(l.Items))
	for i := range l.Items {
		idx[l.Items[i].GetUID()] = &l.Items[i]
	}
	return idx, nil
}

// lookup is an ownerLookup: the object ref points to, nil when it does not
// exist or its kind is not served.
func (x *ownerIndex) lookup(ctx context.Context, namespace string, ref metav1.OwnerReference) (metav1.Object, error) {
	m := x.mapping(ref.APIVersion, ref.Kind)
	if m == nil {
		// A kind the cluster no longer serves cannot be walked; the
		// chain ends there.
		return nil, nil
	}
	l, start := x.listing(m, namespace)
	if start {
		x.fill(ctx, l, m, namespace)
	}
	select {
	case <-l.done:
	case <-ctx.Done():
		return nil, apiError(fmt.Sprintf("list %s to follow owner references", m.Resource.Resource), ctx.Err())
	}
	if l.err != nil {
		return nil, l.err
	}
	return l.idx[ref.UID], nil
}

// mapping returns the mapping of an owner reference's kind, nil when the
// reference is malformed or the cluster does not serve the kind.
func (x *ownerIndex) mapping(apiVersion, kind string) *meta.RESTMapping {
	k := ownerKind{apiVersion, kind}
	x.mu.Lock()
	m, ok := x.mappings[k]
	x.mu.Unlock()
	if ok {
		return m
	}
	if gv, err := schema.ParseGroupVersion(apiVersion); err == nil {
		m, _ = x.c.Mapper.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: kind}, gv.Version)
	}
	x.mu.Lock()
	x.mappings[k] = m
	x.mu.Unlock()
	return m
}

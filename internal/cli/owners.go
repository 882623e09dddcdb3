package cli

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
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
	var out []types.UID
	ref := metav1.GetControllerOfNoCopy(obj)
	ns := obj.GetNamespace()
	for depth := 0; ref != nil && depth < maxOwnerDepth; depth++ {
		out = append(out, ref.UID)
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

// clusterOwnerLookup looks owners up in the cluster. It lists each owner
// kind once per namespace and indexes the result by UID, so a workload of
// a thousand pods over hundreds of Jobs costs one list of Jobs.
func clusterOwnerLookup(c *Cluster) ownerLookup {
	type key struct {
		gk schema.GroupKind
		ns string
	}
	listed := map[key]map[types.UID]metav1.Object{}
	return func(ctx context.Context, namespace string, ref metav1.OwnerReference) (metav1.Object, error) {
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil {
			return nil, nil
		}
		gk := schema.GroupKind{Group: gv.Group, Kind: ref.Kind}
		m, err := c.Mapper.RESTMapping(gk, gv.Version)
		if err != nil {
			// A kind the cluster no longer serves cannot be walked; the
			// chain ends there.
			return nil, nil
		}
		k := key{gk: gk, ns: namespace}
		if m.Scope.Name() != meta.RESTScopeNameNamespace {
			k.ns = ""
		}
		idx, ok := listed[k]
		if !ok {
			var ri dynamic.ResourceInterface = c.Dynamic.Resource(m.Resource)
			if k.ns != "" {
				ri = c.Dynamic.Resource(m.Resource).Namespace(k.ns)
			}
			l, err := ri.List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, apiError(fmt.Sprintf("list %s to follow owner references", m.Resource.Resource), err)
			}
			idx = make(map[types.UID]metav1.Object, len(l.Items))
			for i := range l.Items {
				idx[l.Items[i].GetUID()] = &l.Items[i]
			}
			listed[k] = idx
		}
		return idx[ref.UID], nil
	}
}

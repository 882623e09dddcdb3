package podgrouper

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/definition"
)

// referencer is what a definition with references (muster.io/references)
// offers besides Grouper; *definition.Compiled implements it.
type referencer interface {
	HasReferences() bool
	Targets(ctx context.Context, root *unstructured.Unstructured) ([]definition.Target, error)
}

var _ referencer = (*definition.Compiled)(nil)

// refWatch serves the objects workload definitions reference (a TrainJob's
// runtime) from dynamic informers started on demand, as roots are, and
// remembers which roots name which object, so that an object created or
// changed later requeues exactly the pods of those roots.
type refWatch struct {
	objs *roots

	mu sync.Mutex
	// byRoot is what each root named at its last sync; byObj the reverse.
	byRoot map[types.UID][]string
	byObj  map[string]map[types.UID]struct{}
	// requeue requeues the pods of a root and reports whether it still
	// has any; a root without pods is forgotten.
	requeue func(root types.UID) bool
	// unmapped remembers when a referenced kind was last found not
	// served, so that the mapper's discovery is not reset on every sync
	// of every pod that names it.
	unmapped map[schema.GroupVersionKind]time.Time
}

// unmappedRecheck is how long a referenced kind found not served is taken
// as such, and how soon the pods held for it are synced again: no informer
// watches a kind that is not served, so no event would bring them back when
// its CRD is installed.
const unmappedRecheck = 30 * time.Second

func newRefWatch(client dynamic.Interface, requeue func(types.UID) bool) *refWatch {
	w := &refWatch{byRoot: map[types.UID][]string{}, byObj: map[string]map[types.UID]struct{}{}, requeue: requeue,
		unmapped: map[schema.GroupVersionKind]time.Time{}}
	// Any change may change what an expression reads: metadata as well as
	// spec.
	w.objs = newRoots(client, func(old, cur *unstructured.Unstructured) {
		if old.GetResourceVersion() != cur.GetResourceVersion() {
			w.changed(cur)
		}
	})
	w.objs.onAdd = w.changed
	return w
}

func (w *refWatch) start(ctx context.Context) { w.objs.start(ctx) }
func (w *refWatch) shutdown()                 { w.objs.shutdown() }

// objKey identifies a referenced object across versions of its kind.
func objKey(gk, namespace, name string) string { return gk + "\x00" + namespace + "\x00" + name }

// record replaces what root names.
func (w *refWatch) record(root types.UID, keys []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.forgetLocked(root)
	if len(keys) == 0 {
		return
	}
	w.byRoot[root] = keys
	for _, k := range keys {
		s := w.byObj[k]
		if s == nil {
			s = map[types.UID]struct{}{}
			w.byObj[k] = s
		}
		s[root] = struct{}{}
	}
}

func (w *refWatch) forgetLocked(root types.UID) {
	for _, k := range w.byRoot[root] {
		if s := w.byObj[k]; s != nil {
			delete(s, root)
			if len(s) == 0 {
				delete(w.byObj, k)
			}
		}
	}
	delete(w.byRoot, root)
}

// changed requeues the pods of every root that names obj.
func (w *refWatch) changed(obj *unstructured.Unstructured) {
	key := objKey(obj.GroupVersionKind().GroupKind().String(), obj.GetNamespace(), obj.GetName())
	w.mu.Lock()
	var roots []types.UID
	for r := range w.byObj[key] {
		roots = append(roots, r)
	}
	w.mu.Unlock()
	for _, r := range roots {
		if !w.requeue(r) {
			w.mu.Lock()
			w.forgetLocked(r)
			w.mu.Unlock()
		}
	}
}

// requeueRoot requeues the pods last seen under root.
func (c *Controller) requeueRoot(root types.UID) bool {
	pods := c.index.pods(root)
	for _, key := range pods {
		c.queue.Add(key)
	}
	return len(pods) > 0
}

// bindReferences reads the objects the definition of root references and
// returns ctx with them bound (definition.WithReferences). One that cannot
// be read — it does not exist, its kind is not served, its informer has not
// synced — is bound unresolved: GangForPod then fails with an
// *definition.UnresolvedError if, and only if, the gang reads it, and the
// pods wait (holdReason), since a guess could be a smaller gang than the
// operator creates. The root is recorded first, so that the object's
// arrival requeues its pods. hold is set when the references themselves
// cannot be evaluated.
//
// recheck is set when an object is unresolved because its kind is not
// served: the caller syncs the pod again after unmappedRecheck if the gang
// reads it.
func (c *Controller) bindReferences(ctx context.Context, e *Entry, root *unstructured.Unstructured, l link) (_ context.Context, hold string, recheck bool) {
	r, ok := e.Grouper.(referencer)
	if !ok || !r.HasReferences() {
		return ctx, "", false
	}
	targets, err := r.Targets(ctx, root)
	if err != nil {
		errorsTotal.WithLabelValues(reasonDefinition).Inc()
		return ctx, api.CapReason(fmt.Sprintf("Workload definition %s (%s) failed on %s, so its pods wait: %v; fix the definition", e.Name, e.Source, l, err)), false
	}
	keys := make([]string, len(targets))
	for i, t := range targets {
		keys[i] = objKey(t.Kind.GVK().GroupKind().String(), t.Namespace, t.Name)
	}
	c.refs.record(l.UID, keys)
	b := definition.Bindings{Objects: map[string]*unstructured.Unstructured{}, Unresolved: map[string]string{}}
	for _, t := range targets {
		obj, why, unmapped := c.referenced(ctx, t)
		if why != "" {
			b.Unresolved[t.Reference] = t.String() + " " + why
			recheck = recheck || unmapped
			continue
		}
		b.Objects[t.Reference] = obj
	}
	return definition.WithReferences(ctx, b), "", recheck
}

// unresolvedHold says why the pods of l wait for a referenced object.
func unresolvedHold(e *Entry, l link, ue *definition.UnresolvedError) string {
	return api.CapReason(fmt.Sprintf("%s: definition %s reads $%s, which names %s; its pods wait until muster can read it, since the gang depends on it (%s)",
		l, e.Name, ue.Reference, ue.Why, ue.Field))
}

// referenced reads one target from its informer, or says why it cannot;
// unmapped is set when its kind is not served.
func (c *Controller) referenced(ctx context.Context, t definition.Target) (_ *unstructured.Unstructured, why string, unmapped bool) {
	m, err := c.refs.mapping(c.owners, t.Kind.GVK())
	if err != nil {
		return nil, fmt.Sprintf("is of a kind the cluster does not serve (%s)", t.Kind.GVK()), true
	}
	if namespaced := m.Scope.Name() == meta.RESTScopeNameNamespace; namespaced != t.Kind.Namespaced() {
		return nil, fmt.Sprintf("is declared %s scope but the cluster serves %s with scope %s; fix the definition", scopeName(t.Kind.Namespaced()), m.Resource, m.Scope.Name()), false
	}
	// The informer's initial list and its events bring back the pods of a
	// root that waits for an object: none needs a timer.
	inf, err := c.refs.objs.informer(ctx, m.Resource)
	if err != nil {
		return nil, fmt.Sprintf("cannot be read yet (%v)", err), false
	}
	obj, ok, err := inf.GetStore().GetByKey(cache.NewObjectName(t.Namespace, t.Name).String())
	if err != nil {
		return nil, fmt.Sprintf("cannot be read (%v)", err), false
	}
	u, isU := obj.(*unstructured.Unstructured)
	if !ok || !isU {
		return nil, "does not exist", false
	}
	return u, "", false
}

// mapping maps a referenced kind to its resource through o (which resets
// the mapper once for a kind it does not know), remembering a miss for
// unmappedRecheck.
func (w *refWatch) mapping(o *owners, gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	w.mu.Lock()
	at, miss := w.unmapped[gvk]
	w.mu.Unlock()
	if miss && time.Since(at) < unmappedRecheck {
		return nil, fmt.Errorf("%s is not served", gvk)
	}
	m, err := o.mapping(gvk)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.unmapped[gvk] = time.Now()
		return nil, err
	}
	delete(w.unmapped, gvk)
	return m, nil
}

func scopeName(namespaced bool) string {
	if namespaced {
		return definition.ScopeNamespaced
	}
	return definition.ScopeCluster
}

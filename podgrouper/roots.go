package podgrouper

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// rootSyncTimeout bounds the wait for a newly started root informer. A
// worker waits at most this long once per resource; on timeout it reads the
// object directly.
const rootSyncTimeout = 30 * time.Second

// roots serves workload root objects (the top owners with a definition) from
// dynamic informers started lazily, one per resource, the first time a pod of
// that kind is seen. The informers also tell the controller about scale
// changes (onChange) so min-member follows the workload without waiting for a
// pod event.
type roots struct {
	client   dynamic.Interface
	factory  dynamicinformer.DynamicSharedInformerFactory
	onChange func(old, cur *unstructured.Unstructured)
	// onAdd, when set, is told of every object the informers add
	// (referenced objects: one created later ends a wait).
	onAdd func(obj *unstructured.Unstructured)

	ctx       context.Context // the controller's; informers stop with it
	mu        sync.Mutex
	informers map[schema.GroupVersionResource]cache.SharedIndexInformer
	// unsynced remembers when waiting for an informer last timed out (no
	// list permission, a CRD gone): reads go straight to the API for a
	// while instead of stalling every worker for rootSyncTimeout.
	unsynced map[schema.GroupVersionResource]time.Time
}

// unsyncedBackoff is how long reads bypass an informer that did not sync.
const unsyncedBackoff = time.Minute

func newRoots(client dynamic.Interface, onChange func(old, cur *unstructured.Unstructured)) *roots {
	return &roots{
		client:    client,
		factory:   dynamicinformer.NewDynamicSharedInformerFactory(client, 0),
		onChange:  onChange,
		informers: map[schema.GroupVersionResource]cache.SharedIndexInformer{},
		unsynced:  map[schema.GroupVersionResource]time.Time{},
	}
}

// start records the context the informers run under.
func (r *roots) start(ctx context.Context) {
	r.mu.Lock()
	r.ctx = ctx
	r.mu.Unlock()
}

// shutdown stops every informer and waits for them.
func (r *roots) shutdown() { r.factory.Shutdown() }

func (r *roots) informer(ctx context.Context, gvr schema.GroupVersionResource) (cache.SharedIndexInformer, error) {
	r.mu.Lock()
	inf, ok := r.informers[gvr]
	if !ok {
		if r.ctx == nil {
			r.mu.Unlock()
			return nil, fmt.Errorf("root informers are not started")
		}
		inf = r.factory.ForResource(gvr).Informer()
		_ = inf.SetTransform(stripManagedFields)
		_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) {
				if u, ok := obj.(*unstructured.Unstructured); ok && r.onAdd != nil {
					r.onAdd(u)
				}
			},
			UpdateFunc: func(oldObj, newObj any) {
				o, ok1 := oldObj.(*unstructured.Unstructured)
				n, ok2 := newObj.(*unstructured.Unstructured)
				if ok1 && ok2 && r.onChange != nil {
					r.onChange(o, n)
				}
			},
		})
		if err != nil {
			r.mu.Unlock()
			return nil, fmt.Errorf("watching %s: %w", gvr, err)
		}
		r.informers[gvr] = inf
		r.factory.Start(r.ctx.Done())
		klog.FromContext(ctx).V(2).Info("Started watching workload roots", "resource", gvr.String())
	}
	failed, recently := r.unsynced[gvr]
	r.mu.Unlock()
	if !inf.HasSynced() {
		if recently && time.Since(failed) < unsyncedBackoff {
			return nil, fmt.Errorf("cache of %s not synced", gvr)
		}
		wctx, cancel := context.WithTimeout(ctx, rootSyncTimeout)
		defer cancel()
		// A channel, not WaitForCacheSync's 100 ms poll: the first pods of
		// a kind wait here, and the poll was most of their latency.
		if !cache.WaitFor(wctx, "", inf.HasSyncedChecker()) {
			r.mu.Lock()
			r.unsynced[gvr] = time.Now()
			r.mu.Unlock()
			return nil, fmt.Errorf("cache of %s not synced within %s", gvr, rootSyncTimeout)
		}
	}
	return inf, nil
}

// get returns the root object l, UID-checked. The informer may lag behind a
// just-created workload, so a miss is read through the API. The returned
// object is shared: never modify it.
func (r *roots) get(ctx context.Context, l link) (*unstructured.Unstructured, error) {
	key := l.Name
	if l.Namespace != "" {
		key = l.Namespace + "/" + l.Name
	}
	if inf, err := r.informer(ctx, l.GVR); err == nil {
		if obj, ok, err := inf.GetStore().GetByKey(key); err == nil && ok {
			if u, ok := obj.(*unstructured.Unstructured); ok && u.GetUID() == l.UID {
				return u, nil
			}
		}
	} else {
		klog.FromContext(ctx).V(2).Info("Reading workload root without cache", "resource", l.GVR.String(), "err", err)
	}
	u, err := r.client.Resource(l.GVR).Namespace(l.Namespace).Get(ctx, l.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("workload %s: %w", l, errOwnerGone)
	}
	if err != nil {
		return nil, fmt.Errorf("reading workload %s: %w", l, err)
	}
	if u.GetUID() != l.UID {
		return nil, fmt.Errorf("workload %s has uid %s, want %s: %w", l, u.GetUID(), l.UID, errOwnerGone)
	}
	return u, nil
}

// rootIndex remembers which pods resolved to which root, so a change of the
// root (scale, min-member annotation) requeues exactly its pods.
type rootIndex struct {
	mu     sync.Mutex
	byRoot map[types.UID]map[string]struct{}
	byPod  map[string]types.UID
}

func newRootIndex() *rootIndex {
	return &rootIndex{byRoot: map[types.UID]map[string]struct{}{}, byPod: map[string]types.UID{}}
}

func (x *rootIndex) set(podKey string, root types.UID) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if old, ok := x.byPod[podKey]; ok {
		if old == root {
			return
		}
		x.removeLocked(podKey, old)
	}
	x.byPod[podKey] = root
	s := x.byRoot[root]
	if s == nil {
		s = map[string]struct{}{}
		x.byRoot[root] = s
	}
	s[podKey] = struct{}{}
}

func (x *rootIndex) remove(podKey string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if old, ok := x.byPod[podKey]; ok {
		x.removeLocked(podKey, old)
	}
}

func (x *rootIndex) removeLocked(podKey string, root types.UID) {
	delete(x.byPod, podKey)
	if s := x.byRoot[root]; s != nil {
		delete(s, podKey)
		if len(s) == 0 {
			delete(x.byRoot, root)
		}
	}
}

func (x *rootIndex) pods(root types.UID) []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := make([]string, 0, len(x.byRoot[root]))
	for k := range x.byRoot[root] {
		out = append(out, k)
	}
	return out
}

// stripManagedFields is the informers' transform: managedFields are never
// read here and are often the largest part of an object.
func stripManagedFields(obj any) (any, error) {
	if a, err := metaAccessor(obj); err == nil {
		a.SetManagedFields(nil)
	}
	return obj, nil
}

func metaAccessor(obj any) (metav1.Object, error) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("object of type %T has no metadata", obj)
	}
	return m, nil
}

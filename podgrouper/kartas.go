package podgrouper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/muster-io/muster/api"
	kartav1alpha1 "github.com/muster-io/muster/api/v1alpha1"
	"github.com/muster-io/muster/definition"
)

// KartaResource is the cluster resource of workload definitions.
var KartaResource = schema.GroupVersionResource{Group: kartav1alpha1.Group, Version: kartav1alpha1.Version, Resource: "kartas"}

// LegacyResource is the deprecated resource of workload definitions
// (ResourceInterface, same fields): read as Kartas when its CRD is served.
var LegacyResource = schema.GroupVersionResource{Group: kartav1alpha1.LegacyGroup, Version: kartav1alpha1.Version, Resource: kartav1alpha1.LegacyResource}

// Karta status condition written for every cluster definition.
const (
	ConditionValid = "Valid"
	ReasonCompiled = "Compiled"
	ReasonInvalid  = "Invalid"
	// ReasonShadowed: valid, but another Karta serves the same kind.
	ReasonShadowed   = "Shadowed"
	maxStatusErrors  = 5
	maxStatusMessage = 2000
)

// kartaKey is the one key of the definitions queue: any change re-reads the
// whole set, so a burst of changes is applied once and the registry is
// replaced atomically.
const kartaKey = "kartas"

// kartas keeps the registry's cluster definitions equal to the cluster's
// Karta objects and writes each one's Valid condition.
type kartas struct {
	client   dynamic.Interface
	mapper   meta.RESTMapper
	defs     Definitions
	onChange func()

	factory  dynamicinformer.DynamicSharedInformerFactory
	informer cache.SharedIndexInformer
	// legacy watches ResourceInterfaces when their CRD is served; nil
	// otherwise.
	legacy cache.SharedIndexInformer
	queue  workqueue.TypedRateLimitingInterface[string]
	// applied is the fingerprint (name, uid, generation of every Karta) of
	// the set last given to the registry: status writes, ours included, do
	// not recompile anything or requeue pods.
	applied string
	results map[string]Entry // compile result per Karta name, of that set
	// writes turns on the status writes: off in a replica that is not
	// the leader, which reads the definitions (its admission webhook
	// needs them) but leaves the Karta conditions to the leader.
	writes atomic.Bool
}

func newKartas(client dynamic.Interface, mapper meta.RESTMapper, defs Definitions, onChange func()) *kartas {
	k := &kartas{
		client: client, mapper: mapper, defs: defs, onChange: onChange,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "muster_podgrouper_kartas"},
		),
	}
	k.writes.Store(true)
	return k
}

// enableWrites makes this process write the Karta conditions from now on
// (it became the leader), and re-applies the set once so they are written.
func (k *kartas) enableWrites() {
	if !k.writes.Swap(true) {
		k.queue.Add(kartaKey)
	}
}

// start watches Kartas when their CRD is installed, applies them once before
// returning (so pods are grouped with every definition from the start), and
// keeps applying changes until ctx is done. Without the CRD only the embedded
// definitions are used.
func (k *kartas) start(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	served := k.served(ctx, schema.GroupKind{Group: kartav1alpha1.Group, Kind: kartav1alpha1.Kind})
	legacyServed := k.served(ctx, schema.GroupKind{Group: kartav1alpha1.LegacyGroup, Kind: kartav1alpha1.LegacyKind})
	if legacyServed {
		// An install whose role predates the deprecated kind may not be
		// allowed to list it: an informer would then never sync and the
		// pod-grouper never start. Ask once; without access the
		// ResourceInterfaces are left out, and said so.
		if _, err := k.client.Resource(LegacyResource).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
			logger.Error(err, "The deprecated ResourceInterface CRD is served but cannot be listed; its objects are not read (grant list and watch on resourceinterfaces.optimization.nvidia.com)")
			legacyServed = false
		}
	}
	if !served && !legacyServed {
		logger.Info("Karta CRD not installed; using the embedded definitions only")
		k.queue.ShutDown()
		return nil
	}
	k.factory = dynamicinformer.NewDynamicSharedInformerFactory(k.client, 0)
	enqueue := func(any) { k.queue.Add(kartaKey) }
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue,
		// Only spec changes (generation) matter; our own status writes
		// come back as updates too.
		UpdateFunc: func(o, n any) {
			om, err1 := metaAccessor(o)
			nm, err2 := metaAccessor(n)
			if err1 != nil || err2 != nil || om.GetGeneration() != nm.GetGeneration() || om.GetUID() != nm.GetUID() {
				k.queue.Add(kartaKey)
			}
		},
		DeleteFunc: enqueue,
	}
	var synced []cache.InformerSynced
	for _, w := range []struct {
		on  bool
		gvr schema.GroupVersionResource
		inf *cache.SharedIndexInformer
	}{{served, KartaResource, &k.informer}, {legacyServed, LegacyResource, &k.legacy}} {
		if !w.on {
			continue
		}
		*w.inf = k.factory.ForResource(w.gvr).Informer()
		_ = (*w.inf).SetTransform(stripManagedFields)
		if _, err := (*w.inf).AddEventHandler(handler); err != nil {
			return fmt.Errorf("watching %s: %w", w.gvr.Resource, err)
		}
		synced = append(synced, (*w.inf).HasSynced)
	}
	if legacyServed {
		logger.Info("The deprecated ResourceInterface CRD is served: its objects are read as Kartas", "resource", LegacyResource.String())
	}
	k.factory.Start(ctx.Done())
	if !cache.WaitForNamedCacheSyncWithContext(ctx, synced...) {
		return fmt.Errorf("podgrouper: Karta cache not synced: %w", context.Cause(ctx))
	}
	if err := k.apply(ctx); err != nil {
		logger.Error(err, "Applying cluster definitions; retrying")
		k.queue.AddRateLimited(kartaKey)
	}
	go wait.UntilWithContext(ctx, k.worker, time.Second)
	return nil
}

// served reports whether the cluster serves gk, asking discovery again
// once when the mapper's cache does not know it.
func (k *kartas) served(ctx context.Context, gk schema.GroupKind) bool {
	_, err := k.mapper.RESTMapping(gk, kartav1alpha1.Version)
	if r, ok := k.mapper.(meta.ResettableRESTMapper); ok && meta.IsNoMatchError(err) {
		r.Reset()
		_, err = k.mapper.RESTMapping(gk, kartav1alpha1.Version)
	}
	if err != nil && !meta.IsNoMatchError(err) {
		klog.FromContext(ctx).Info("Cannot tell whether the cluster serves a definition kind; not watching it", "kind", gk.String(), "err", err)
	}
	return err == nil
}

func (k *kartas) shutdown() {
	k.queue.ShutDown()
	if k.factory != nil {
		k.factory.Shutdown()
	}
}

func (k *kartas) worker(ctx context.Context) {
	for {
		key, quit := k.queue.Get()
		if quit {
			return
		}
		err := k.apply(ctx)
		if err != nil {
			klog.FromContext(ctx).Error(err, "Applying cluster definitions; retrying")
			k.queue.AddRateLimited(key)
		} else {
			k.queue.Forget(key)
		}
		k.queue.Done(key)
	}
}

// apply decodes every Karta, replaces the registry's cluster set, writes
// each Karta's Valid condition, and tells the controller when definitions
// changed. A Karta that does not decode or compile is reported on its
// status and left out; it never affects the others.
func (k *kartas) apply(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	var objs []any
	if k.informer != nil {
		objs = k.informer.GetStore().List()
	}
	// A ResourceInterface is listed after the Kartas, so a Karta of the
	// same name keeps it out.
	if k.legacy != nil {
		objs = append(objs, k.legacy.GetStore().List()...)
	}
	var decoded []*kartav1alpha1.Karta
	var prints []string
	invalid := map[string]error{}
	byName := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		if _, dup := byName[u.GetName()]; dup {
			logger.Info("A ResourceInterface has the name of a Karta; the Karta is used", "name", u.GetName())
			continue
		}
		byName[u.GetName()] = u
		prints = append(prints, fmt.Sprintf("%s/%s/%d", u.GetName(), u.GetUID(), u.GetGeneration()))
		kt, err := decodeKarta(u)
		if err != nil {
			invalid[u.GetName()] = err
			continue
		}
		if definition.IsLegacy(kt) {
			logger.Info("Deprecated definition format: "+definition.LegacyNotice(kt.Name), "resourceinterface", kt.Name)
		}
		decoded = append(decoded, kt)
	}
	sort.Slice(decoded, func(i, j int) bool { return decoded[i].Name < decoded[j].Name })
	sort.Strings(prints)
	fingerprint := strings.Join(prints, ",")
	changed := fingerprint != k.applied
	if changed {
		k.results = map[string]Entry{}
		for _, e := range k.defs.SetCluster(decoded) {
			k.results[e.Name] = e
		}
		k.applied = fingerprint
	}
	for name, e := range k.results {
		if e.Err != nil {
			invalid[name] = e.Err
		}
	}
	var errs []error
	for name, u := range byName {
		cond := metav1.Condition{Type: ConditionValid, Status: metav1.ConditionTrue, Reason: ReasonCompiled,
			Message: "the definition is valid and in use", ObservedGeneration: u.GetGeneration()}
		res := k.results[name]
		if err, bad := invalid[name]; bad {
			errorsTotal.WithLabelValues(reasonKartaDecode).Inc()
			cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, ReasonInvalid, statusMessage(err)
			if g := res.LastGoodGeneration; g > 0 {
				cond.Message = truncateMessage(fmt.Sprintf("generation %d (the last valid one) is still in use; ", g) + cond.Message)
			}
			logger.Info("Cluster definition is invalid", "karta", name, "err", cond.Message)
		} else if u.GetKind() == kartav1alpha1.LegacyKind && res.ShadowedBy == "" {
			cond.Message += "; deprecated: " + definition.LegacyNotice(name)
		} else if res.ShadowedBy != "" {
			cond.Reason = ReasonShadowed
			cond.Message = fmt.Sprintf("the definition is valid but not in use: karta %s defines the same kind %s and wins (of several Kartas for one kind, the first by name is used)", res.ShadowedBy, res.GroupKind)
		}
		if err := k.writeCondition(ctx, u, cond); err != nil {
			errorsTotal.WithLabelValues(reasonKartaStatus).Inc()
			errs = append(errs, err)
		}
	}
	if changed && k.onChange != nil {
		k.onChange()
	}
	return errors.Join(errs...)
}

// decodeKarta decodes u strictly through the definition decoder, so an
// unknown field is an error naming it.
func decodeKarta(u *unstructured.Unstructured) (*kartav1alpha1.Karta, error) {
	c := u.DeepCopy()
	// Status is ours, not part of the definition; metadata noise is dropped
	// so the strict decoder sees only what the user wrote.
	unstructured.RemoveNestedField(c.Object, "status")
	data, err := json.Marshal(c.Object)
	if err != nil {
		return nil, err
	}
	return definition.Decode(data)
}

// statusMessage renders the first errors with their field paths.
func statusMessage(err error) string {
	var ve *definition.ValidationError
	var msgs []string
	if errors.As(err, &ve) && len(ve.Errs) > 0 {
		for i, e := range ve.Errs {
			if i == maxStatusErrors {
				msgs = append(msgs, fmt.Sprintf("and %d more", len(ve.Errs)-i))
				break
			}
			var fe *field.Error
			if errors.As(e, &fe) {
				msgs = append(msgs, fe.Error())
			} else {
				msgs = append(msgs, e.Error())
			}
		}
	} else {
		msgs = []string{err.Error()}
	}
	return truncateMessage(strings.Join(msgs, "; "))
}

// truncateMessage caps a condition message: it is shown by kubectl and kept
// in etcd, and a definition's value may be as long as the CRD allows.
func truncateMessage(m string) string { return api.Truncate(m, maxStatusMessage) }

// writeCondition sets cond on u's status when it differs.
func (k *kartas) writeCondition(ctx context.Context, u *unstructured.Unstructured, cond metav1.Condition) error {
	if !k.writes.Load() {
		return nil
	}
	var conds []metav1.Condition
	if raw, ok, _ := unstructured.NestedSlice(u.Object, "status", "conditions"); ok {
		data, _ := json.Marshal(raw)
		_ = json.Unmarshal(data, &conds)
	}
	if cur := meta.FindStatusCondition(conds, cond.Type); cur != nil && cur.Status == cond.Status &&
		cur.Reason == cond.Reason && cur.Message == cond.Message && cur.ObservedGeneration == cond.ObservedGeneration {
		return nil
	}
	meta.SetStatusCondition(&conds, cond)
	data, err := json.Marshal(conds)
	if err != nil {
		return err
	}
	var raw []any
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	c := u.DeepCopy()
	if err := unstructured.SetNestedSlice(c.Object, raw, "status", "conditions"); err != nil {
		return err
	}
	gvr := KartaResource
	if u.GetKind() == kartav1alpha1.LegacyKind {
		gvr = LegacyResource
	}
	_, err = k.client.Resource(gvr).UpdateStatus(ctx, c, metav1.UpdateOptions{FieldManager: FieldManager})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		// Deleted, or changed meanwhile: the informer brings the new
		// version and apply runs again. (Also a ResourceInterface CRD
		// without the status subresource: nothing to write to.)
		return nil
	}
	if err != nil {
		return fmt.Errorf("writing status of Karta %s: %w", u.GetName(), err)
	}
	return nil
}

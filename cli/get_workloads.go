package cli

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/pager"
	"k8s.io/kubectl/pkg/util/podutils"

	kartav1alpha1 "github.com/muster-io/muster/api/v1alpha1"
	"github.com/muster-io/muster/catalog"
)

// listObjects lists one resource in pages of chunk objects (0: one request)
// through client-go's pager, which also falls back to one full list when a
// continue token expires.
func listObjects(ctx context.Context, ri dynamic.ResourceInterface, opts metav1.ListOptions, chunk int64) ([]*unstructured.Unstructured, error) {
	p := pager.New(pager.SimplePageFunc(func(opts metav1.ListOptions) (runtime.Object, error) {
		return ri.List(ctx, opts)
	}))
	p.PageSize = chunk
	var out []*unstructured.Unstructured
	err := p.EachListItem(ctx, opts, func(obj runtime.Object) error {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return fmt.Errorf("unexpected list item %T", obj)
		}
		out = append(out, u)
		return nil
	})
	return out, err
}

// kindToList is one kind get lists, with the definition that reads it.
type kindToList struct {
	ent     *catalog.Entry
	mapping *meta.RESTMapping
}

// listableKind picks how to list gk: at the version of a definition the
// cluster serves (the API server converts every object to it), else at the
// preferred version with the definition Resolve finds for it. A kind the
// cluster does not serve, or no definition fits, is left out (with a
// warning for the latter).
func (o *GetOptions) listableKind(c *Cluster, defs *definitions, gk schema.GroupKind) (kindToList, bool) {
	for _, ent := range defs.reg.ForKind(gk) {
		if ent.Compiled == nil {
			continue
		}
		if m, err := c.Mapper.RESTMapping(gk, ent.Version); err == nil {
			return kindToList{ent, m}, true
		}
	}
	m, ok := served(c.Mapper, gk)
	if !ok {
		return kindToList{}, false
	}
	ent, err := defs.forGVK(m.GroupVersionKind)
	if err != nil {
		o.env.warnf("%s: %v", m.Resource.Resource, err)
		return kindToList{}, false
	}
	return kindToList{ent, m}, true
}

// kindsToList is the kind TYPE names, else every defined kind the cluster
// serves.
func (o *GetOptions) kindsToList(c *Cluster, defs *definitions) ([]kindToList, error) {
	if o.TypeArg != "" {
		rt, err := resolveType(c.Mapper, o.TypeArg)
		if err != nil {
			if isUnreachable(err) {
				return nil, apiError("discover types", err)
			}
			return nil, unknownTypeError(o.TypeArg, defs, c)
		}
		ent, err := defs.forGVK(rt.GVK)
		if err != nil {
			return nil, err
		}
		return []kindToList{{ent, rt.Mapping}}, nil
	}
	var kinds []kindToList
	seen := map[schema.GroupKind]bool{}
	for _, e := range defs.reg.List() {
		if e.Err != nil || seen[e.GroupKind] {
			continue
		}
		seen[e.GroupKind] = true
		if k, ok := o.listableKind(c, defs, e.GroupKind); ok {
			kinds = append(kinds, k)
		}
	}
	return kinds, nil
}

// listedWorkload is one workload get shows, with its pods and PodGroups.
type listedWorkload struct {
	obj  *unstructured.Unstructured
	ent  *catalog.Entry
	pods []*corev1.Pod
	pgs  []*podGroupInfo
	// kueue is the Kueue Workload of the workload, nil for none.
	kueue *unstructured.Unstructured
}

// topLevelWorkloads reads the workloads of kinds: the one NAME names, else
// those listed that no defined workload owns. owned counts, per resource,
// the objects left out because a defined workload above them owns them,
// so "nothing found" can say so.
func (o *GetOptions) topLevelWorkloads(ctx context.Context, c *Cluster, defs *definitions, kinds []kindToList, ns string) ([]listedWorkload, map[string]int, error) {
	var wls []listedWorkload
	owned := map[string]int{}
	top := newOwnerWalker(clusterOwnerLookup(c))
	for _, k := range kinds {
		ri := c.Dynamic.Resource(k.mapping.Resource)
		var rif dynamic.ResourceInterface = ri
		if k.mapping.Scope.Name() == meta.RESTScopeNameNamespace && ns != "" {
			rif = ri.Namespace(ns)
		}
		if o.NameArg != "" {
			obj, err := o.getNamed(ctx, rif, k, ns)
			if err != nil {
				return nil, nil, err
			}
			// A named workload is shown even when a defined workload
			// owns it: the user asked for it.
			wls = append(wls, listedWorkload{obj: obj, ent: k.ent})
			continue
		}
		items, err := listObjects(ctx, rif, metav1.ListOptions{LabelSelector: o.Selector}, o.ChunkSize)
		if err != nil {
			if isUnreachable(err) {
				return nil, nil, apiError("list "+k.mapping.Resource.Resource, err)
			}
			o.env.warnf("cannot list %s: %v", k.mapping.Resource.Resource, err)
			continue
		}
		for _, obj := range items {
			if o.ownedByDefined(ctx, top, defs, obj) {
				owned[k.mapping.Resource.Resource]++
				continue
			}
			wls = append(wls, listedWorkload{obj: obj, ent: k.ent})
		}
	}
	return wls, owned, nil
}

// getNamed reads the workload NAME of kind k.
func (o *GetOptions) getNamed(ctx context.Context, rif dynamic.ResourceInterface, k kindToList, ns string) (*unstructured.Unstructured, error) {
	obj, err := rif.Get(ctx, o.NameArg, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		where := ""
		if ns != "" && k.mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			where = " in namespace " + ns
		}
		return nil, notFoundErrorf("%s %q not found%s", k.mapping.GroupVersionKind.Kind, o.NameArg, where)
	}
	if err != nil {
		return nil, apiError("get "+k.mapping.Resource.Resource+" "+o.NameArg, err)
	}
	return obj, nil
}

// ownedByDefined says whether a controller above obj has a definition. An
// object is top-level when none has, however many undefined objects sit in
// between: a Deployment's pods (pod → ReplicaSet → Deployment) belong to
// the Deployment.
func (o *GetOptions) ownedByDefined(ctx context.Context, w *ownerWalker, defs *definitions, obj *unstructured.Unstructured) bool {
	refs, err := w.refs(ctx, obj)
	if err != nil {
		o.env.warnf("%s %s/%s: %v", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
	}
	for _, ref := range refs {
		if gv, err := schema.ParseGroupVersion(ref.APIVersion); err == nil {
			if _, ok := defs.reg.LookupGVK(gv.WithKind(ref.Kind)); ok {
				return true
			}
		}
	}
	return false
}

// addPods lists the pods of ns and gives each to the first workload of
// wls (by UID in byUID) up its owner chain.
func (o *GetOptions) addPods(ctx context.Context, c *Cluster, ns string, wls []listedWorkload, byUID map[types.UID]int) error {
	pods, err := c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return apiError("list pods", err)
	}
	walker := newOwnerWalker(clusterOwnerLookup(c))
	for i := range pods.Items {
		walker.remember(&pods.Items[i])
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if wi, ok := byUID[p.UID]; ok {
			// A pod listed as a workload is its own only pod (as
			// describe shows it): pods below it belong higher up.
			wls[wi].pods = append(wls[wi].pods, p)
			continue
		}
		chain, err := walker.chain(ctx, p)
		if err != nil {
			o.env.warnf("pod %s/%s: %v", p.Namespace, p.Name, err)
		}
		if wi, ok := firstListed(chain, byUID); ok && !isPod(wls[wi].obj) {
			wls[wi].pods = append(wls[wi].pods, p)
		}
	}
	return nil
}

// firstListed finds the first of uids that is a workload of byUID.
func firstListed(uids []types.UID, byUID map[types.UID]int) (int, bool) {
	for _, u := range uids {
		if wi, ok := byUID[u]; ok {
			return wi, true
		}
	}
	return 0, false
}

// addPodGroups gives each workload of wls the PodGroups it owns. The
// PodGroups only add the gangs' state: when they cannot be listed the rows
// are still worth showing, with a warning.
func (o *GetOptions) addPodGroups(ctx context.Context, c *Cluster, ns string, wls []listedWorkload, byUID map[types.UID]int) {
	pgs, err := readPodGroups(ctx, c, ns)
	if err != nil {
		o.env.warnf("cannot list PodGroups: %v", err)
		return
	}
	for i := range pgs {
		pg := &pgs[i]
		for _, r := range pg.GetOwnerReferences() {
			if wi, ok := byUID[r.UID]; ok {
				wls[wi].pgs = append(wls[wi].pgs, podGroupFrom(pg))
				break
			}
		}
	}
	o.addNativePodGroups(ctx, c, ns, wls, byUID)
}

// addKueue finds each workload's Kueue Workload; without Kueue there are
// none. Like PodGroups they only add state: a failed list is a warning.
func (o *GetOptions) addKueue(ctx context.Context, c *Cluster, ns string, wls []listedWorkload) {
	items, err := listKueueWorkloads(ctx, c, ns)
	if err != nil {
		o.env.warnf("%v", err)
		return
	}
	for i := range wls {
		wls[i].kueue = kueueWorkloadOf(items, wls[i].obj.GetUID())
	}
}

// queueCell is get's QUEUE column: Kueue's state and the ClusterQueue of
// an admission, else the LocalQueue.
func queueCell(r WorkloadRow) string {
	switch {
	case r.Queue == nil:
		return ""
	case r.Queue.ClusterQueue != "":
		return r.Queue.State + " (" + r.Queue.ClusterQueue + ")"
	case r.Queue.LocalQueue != "":
		return r.Queue.State + " (localqueue " + r.Queue.LocalQueue + ")"
	}
	return r.Queue.State
}

// workloadRow summarises one workload for get.
func workloadRow(ctx context.Context, obj *unstructured.Unstructured, ent *catalog.Entry, pods []*corev1.Pod, pgs []*podGroupInfo, now time.Time, gpus gpuCount) WorkloadRow {
	r := WorkloadRow{
		Namespace:  obj.GetNamespace(),
		Kind:       obj.GetKind(),
		APIVersion: obj.GetAPIVersion(),
		Name:       obj.GetName(),
		Definition: ent.Name,
		Phases:     []string{},
	}
	if ts := obj.GetCreationTimestamp().Time; !ts.IsZero() {
		r.Created = ts.UTC().Format(time.RFC3339)
		r.Age = duration.HumanDuration(now.Sub(ts))
	}
	cp := ent.Compiled
	if st, err := cp.Status(ctx, obj); err == nil {
		for _, s := range st.ByPrecedence() {
			r.Phases = append(r.Phases, string(s))
		}
	}
	if len(r.Phases) == 0 {
		r.Phases = []string{string(kartav1alpha1.StatusUndefined)}
	}
	wl, err := cp.Extract(ctx, obj)
	if err != nil {
		r.Error = oneLine(err.Error())
	} else {
		for _, c := range wl.Components {
			if !c.HasPods {
				continue
			}
			for _, inst := range c.Instances {
				r.Pods += inst.Pods
				if inst.Template != nil {
					r.GPUs += requestsOf(&inst.Template.Spec, gpus).gpus * inst.Pods
				}
			}
		}
	}
	nodes := map[string]bool{}
	// Keyed as podGangKey keys them: a native PodGroup apart from a
	// scheduler-plugins one of the same name.
	gangKeyOfPod := podGangKey(pgs)
	boundByPG := map[string]int{}
	unschedulablePG := map[string]bool{}
	for _, p := range pods {
		if n := gangKeyOfPod(p); n != "" && p.Spec.NodeName == "" && unschedulable(p) {
			unschedulablePG[n] = true
		}
		if podutils.IsPodReady(p) {
			r.ReadyPods++
		}
		if p.Spec.NodeName != "" {
			nodes[p.Spec.NodeName] = true
			// A gang is bound by members that will stay: not one being
			// deleted or already failed (describe counts the same way).
			if n := gangKeyOfPod(p); n != "" && p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodFailed {
				boundByPG[n]++
			}
		}
	}
	for n := range nodes {
		r.Nodes = append(r.Nodes, n)
	}
	sort.Strings(r.Nodes)
	if plans, err := cp.GangPlans(ctx, obj); err == nil {
		for _, pl := range plans {
			r.Gangs += pl.Instances
		}
	}
	if len(pgs) > r.Gangs {
		r.Gangs = len(pgs)
	}
	for _, pg := range pgs {
		if pg.Priority != nil && (r.Priority == nil || *pg.Priority > *r.Priority) {
			r.Priority = pg.Priority
		}
		if pg.Native {
			r.NativeGangs++
		}
		switch {
		case pg.MinMember > 0 && int32(boundByPG[pg.key()]) >= pg.MinMember:
			r.GangsBound++
		case unschedulablePG[pg.key()], pg.Native && pg.Phase == "Unschedulable":
			r.GangsUnschedulable++
		}
	}
	return r
}

// unschedulable reports whether the scheduler said it cannot place pod.
func unschedulable(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

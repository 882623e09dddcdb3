package cli

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/muster-io/muster/api"
)

// podGroupGVR is the scheduler-plugins PodGroup the pod-grouper writes.
var (
	podGroupGVR = schema.GroupVersionResource{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "podgroups"}
	podGroupGK  = schema.GroupKind{Group: "scheduling.x-k8s.io", Kind: "PodGroup"}
)

// runLive reads the workload, its pods, PodGroups and scheduling events.
//
// The requests that do not need an earlier answer run at once: the pods,
// PodGroups and events of the namespace are listed while the definitions
// load and the workload is fetched, and the owners the pods may pass
// through (the definition's child kinds) are listed as soon as the
// definition is known. Errors are still reported in the order a one-by-one
// run meets them: definitions, type, definition for the kind, the
// workload, its pods.
func (o *DescribeOptions) runLive(ctx context.Context) (*Description, error) {
	c, err := o.env.Cluster()
	if err != nil {
		return nil, err
	}
	// Cancel what is still in flight when an error ends the run early.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pending := o.env.startDefinitions(ctx, c)
	ns := c.namespaceOr(o.Namespace)
	rt, rtErr := resolveType(c.Mapper, o.typeArg)
	var f *liveFetch
	if rtErr == nil {
		f = startLiveFetch(ctx, c, rt.Mapping, ns, o.nameArg)
	}

	defs, err := pending.wait()
	if err != nil {
		return nil, err
	}
	if rtErr != nil {
		if isUnreachable(rtErr) {
			return nil, apiError("discover types", rtErr)
		}
		full, err := defs.full()
		if err != nil {
			return nil, err
		}
		return nil, unknownTypeError(o.typeArg, full, c)
	}
	ent, err := defs.forGVK(rt.GVK)
	if err != nil {
		return nil, err
	}
	if f.namespaced {
		f.owners.prefetch(ctx, ns, childKinds(ent.Compiled.Definition()))
	}

	root, err := f.waitRoot(rt, o.nameArg, ns)
	if err != nil {
		return nil, err
	}
	in := describeInput{
		Root:     root,
		Def:      entryRef(ent),
		Compiled: ent.Compiled,
		Live:     true,
		Now:      o.env.Now(),
		PodLimit: o.PodLimit,
		GPUNames: o.env.gpuNames(),
	}
	if root.GetNamespace() != "" {
		if err := f.addNamespaceLists(ctx, root, &in); err != nil {
			return nil, err
		}
	}
	ctx, refWarnings := liveRefs(c).bind(ctx, ent.Compiled, root)
	in.Warnings = append(in.Warnings, refWarnings...)
	return buildDescription(ctx, in)
}

// liveFetch is the requests of one live describe in flight. Each result
// is read only after its done channel closes (rootDone) or wg.Wait returns
// (the namespace lists).
type liveFetch struct {
	rootDone chan struct{}
	root     *unstructured.Unstructured
	rootErr  error

	// namespaced says whether the namespace lists were started: a
	// cluster-scoped workload has no pods of its own namespace.
	namespaced   bool
	wg           sync.WaitGroup
	pods         []corev1.Pod
	podsErr      error
	podGroups    []unstructured.Unstructured
	podGroupsErr error
	// nativePodGroups are the native PodGroups of the namespace;
	// nativeServed says whether the cluster serves their API.
	nativePodGroups    []schedulingv1beta1.PodGroup
	nativeServed       bool
	nativePodGroupsErr error
	events             map[string]string
	eventTimes         map[string]time.Time
	eventsErr          error
	claimTemplates     []resourcev1.ResourceClaimTemplate
	claimTemplatesErr  error
	kueueWorkloads     []unstructured.Unstructured
	kueueWorkloadsErr  error

	owners  *ownerIndex
	cluster *Cluster
}

// startLiveFetch starts fetching the workload and, for a namespaced kind,
// listing the pods, PodGroups and scheduling events of its namespace.
func startLiveFetch(ctx context.Context, c *Cluster, m *meta.RESTMapping, ns, name string) *liveFetch {
	f := &liveFetch{rootDone: make(chan struct{}), owners: newOwnerIndex(c), cluster: c}
	f.namespaced = m.Scope.Name() == meta.RESTScopeNameNamespace
	go func() {
		defer close(f.rootDone)
		ri := c.Dynamic.Resource(m.Resource)
		if f.namespaced {
			f.root, f.rootErr = ri.Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		} else {
			f.root, f.rootErr = ri.Get(ctx, name, metav1.GetOptions{})
		}
	}()
	if !f.namespaced {
		return f
	}
	f.wg.Add(6)
	go func() {
		defer f.wg.Done()
		f.kueueWorkloads, f.kueueWorkloadsErr = listKueueWorkloads(ctx, c, ns)
	}()
	go func() {
		defer f.wg.Done()
		// resourceVersion 0: the API server's cache is as fresh as a
		// person needs and spares etcd a read of every pod.
		list, err := c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			f.podsErr = err
			return
		}
		f.pods = list.Items
	}()
	go func() {
		defer f.wg.Done()
		f.podGroups, f.podGroupsErr = listPodGroups(ctx, c, ns)
	}()
	go func() {
		defer f.wg.Done()
		f.nativePodGroups, f.nativeServed, f.nativePodGroupsErr = listNativePodGroups(ctx, c, ns)
	}()
	go func() {
		defer f.wg.Done()
		f.events, f.eventTimes, f.eventsErr = schedulingEvents(ctx, c, ns)
	}()
	go func() {
		defer f.wg.Done()
		f.claimTemplates, f.claimTemplatesErr = listClaimTemplates(ctx, c, ns)
	}()
	return f
}

// waitRoot waits for the workload object and says, as the CLI does, why it
// could not be read.
func (f *liveFetch) waitRoot(rt *resolvedType, name, ns string) (*unstructured.Unstructured, error) {
	<-f.rootDone
	if err := f.rootErr; err != nil {
		if apierrors.IsNotFound(err) {
			return nil, notFoundErrorf("%s %q not found in namespace %q (try \"muster get %s -A\")", rt.Mapping.Resource.Resource, name, ns, strings.ToLower(rt.GVK.Kind))
		}
		return nil, apiError(fmt.Sprintf("get %s %s", rt.Mapping.Resource.Resource, name), err)
	}
	return f.root, nil
}

// addNamespaceLists waits for the lists of the workload's namespace and
// keeps what is the workload's. PodGroups and events only explain: when
// they cannot be listed the tree is still worth showing, with a warning.
func (f *liveFetch) addNamespaceLists(ctx context.Context, root *unstructured.Unstructured, in *describeInput) error {
	f.wg.Wait()
	if f.podsErr != nil {
		return apiError("list pods in "+root.GetNamespace(), f.podsErr)
	}
	var err error
	in.Pods, err = workloadPods(ctx, f.owners, root, f.pods)
	if err != nil {
		return err
	}
	if f.podGroupsErr != nil {
		in.Warnings = append(in.Warnings, f.podGroupsErr.Error())
	} else {
		in.PodGroups = workloadPodGroups(root, f.podGroups, in.Pods)
		in.GangPods = podsByPodGroup(f.pods, in.PodGroups)
	}
	// Where the API is not served the native maps stay nil, and the
	// view is the one of a cluster without native gangs.
	switch {
	case f.nativePodGroupsErr != nil:
		in.Warnings = append(in.Warnings, f.nativePodGroupsErr.Error())
	case f.nativeServed:
		in.NativePodGroups = workloadNativePodGroups(root, f.nativePodGroups, in.Pods)
		in.NativeGangPods = podsByNativePodGroup(f.pods, in.NativePodGroups, in.Pods)
	}
	in.SchedulingEvents, in.SchedulingEventTimes = f.events, f.eventTimes
	if f.eventsErr != nil {
		in.Warnings = append(in.Warnings, f.eventsErr.Error())
	}
	if f.claimTemplatesErr != nil {
		in.Warnings = append(in.Warnings, f.claimTemplatesErr.Error())
	}
	in.ClaimTemplates = claimTemplatesByName(f.claimTemplates)
	if f.kueueWorkloadsErr != nil {
		in.Warnings = append(in.Warnings, f.kueueWorkloadsErr.Error())
	} else if wl := kueueWorkloadOf(f.kueueWorkloads, root.GetUID()); wl != nil {
		in.Kueue = &kueueInput{Workload: wl}
		in.Warnings = append(in.Warnings, readKueueQueue(ctx, f.cluster, in.Kueue)...)
	}
	return nil
}

// podsByPodGroup maps each PodGroup of pgs to the pods of the namespace
// labelled with it.
func podsByPodGroup(pods []corev1.Pod, pgs map[string]*podGroupInfo) map[string][]*corev1.Pod {
	out := map[string][]*corev1.Pod{}
	for i := range pods {
		if n := pods[i].Labels[api.LabelPodGroup]; n != "" && pgs[n] != nil {
			out[n] = append(out[n], &pods[i])
		}
	}
	return out
}

// isPod says whether obj is a core v1 Pod.
func isPod(obj *unstructured.Unstructured) bool {
	gvk := obj.GroupVersionKind()
	return gvk.Group == "" && gvk.Kind == "Pod"
}

// workloadPods keeps the pods whose controller owner chain reaches root. A
// pod described as a workload of its own is its only pod: pods it owns
// (through an object it controls, as a leader pod owns its workers' set)
// are components of the workload above it, not of this view.
func workloadPods(ctx context.Context, owners *ownerIndex, root *unstructured.Unstructured, pods []corev1.Pod) ([]*corev1.Pod, error) {
	if isPod(root) {
		for i := range pods {
			if pods[i].UID == root.GetUID() {
				return []*corev1.Pod{&pods[i]}, nil
			}
		}
		// Listed from the server's cache, a pod just created may be
		// missing there; the object itself was read.
		p := &corev1.Pod{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(root.Object, p); err != nil {
			return nil, fmt.Errorf("pod %s: %v", root.GetName(), err)
		}
		return []*corev1.Pod{p}, nil
	}
	w := newOwnerWalker(owners.lookup)
	for i := range pods {
		w.remember(&pods[i])
	}
	w.remember(root)
	var out []*corev1.Pod
	for i := range pods {
		p := &pods[i]
		ok, err := w.reaches(ctx, p, root.GetUID())
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, p)
		}
	}
	return out, nil
}

// listPodGroups lists the PodGroups of ns (every namespace for ""); a
// cluster without the PodGroup CRD has none.
func listPodGroups(ctx context.Context, c *Cluster, ns string) ([]unstructured.Unstructured, error) {
	pgs, err := readPodGroups(ctx, c, ns)
	if err != nil {
		return nil, fmt.Errorf("list PodGroups: %v", err)
	}
	return pgs, nil
}

// readPodGroups is listPodGroups with the API's error as it came, for a
// caller that words its own.
func readPodGroups(ctx context.Context, c *Cluster, ns string) ([]unstructured.Unstructured, error) {
	if _, err := c.Mapper.RESTMapping(podGroupGK, podGroupGVR.Version); err != nil {
		return nil, nil
	}
	list, err := c.Dynamic.Resource(podGroupGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// workloadPodGroups keeps the PodGroups of root: those labelled with its
// name and kind or owned by it, and those its pods are labelled with.
func workloadPodGroups(root *unstructured.Unstructured, pgs []unstructured.Unstructured, pods []*corev1.Pod) map[string]*podGroupInfo {
	labelled := map[string]bool{}
	for _, p := range pods {
		if n := p.Labels[api.LabelPodGroup]; n != "" {
			labelled[n] = true
		}
	}
	out := map[string]*podGroupInfo{}
	for i := range pgs {
		pg := &pgs[i]
		mine := labelled[pg.GetName()] ||
			(pg.GetLabels()[api.LabelWorkloadName] == root.GetName() && pg.GetLabels()[api.LabelWorkloadKind] == root.GetKind())
		for _, r := range pg.GetOwnerReferences() {
			if r.UID == root.GetUID() {
				mine = true
			}
		}
		if mine {
			out[pg.GetName()] = podGroupFrom(pg)
		}
	}
	return out
}

func podGroupFrom(pg *unstructured.Unstructured) *podGroupInfo {
	info := &podGroupInfo{Name: pg.GetName()}
	if v, ok, _ := unstructured.NestedInt64(pg.Object, "spec", "minMember"); ok {
		info.MinMember = int32(v)
	}
	if rl, ok, _ := unstructured.NestedMap(pg.Object, "spec", "minResources"); ok {
		info.MinResources = map[string]string{}
		for k, v := range rl {
			info.MinResources[k] = fmt.Sprint(v)
		}
	}
	info.Phase, _, _ = unstructured.NestedString(pg.Object, "status", "phase")
	if prio, ok := api.PodGroupPriority(pg.GetAnnotations()); ok {
		info.Priority = &prio
		info.PriorityClass = pg.GetAnnotations()[api.AnnotationPriorityClass]
	}
	return info
}

// schedulingEvents maps "Pod/<name>" and "PodGroup/<name>" to the message
// of their latest FailedScheduling event in ns, and to its time.
func schedulingEvents(ctx context.Context, c *Cluster, ns string) (map[string]string, map[string]time.Time, error) {
	list, err := c.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedScheduling"})
	if err != nil {
		return nil, nil, fmt.Errorf("list scheduling events: %v", err)
	}
	type latest struct {
		at  metav1.Time
		msg string
	}
	best := map[string]latest{}
	for _, ev := range list.Items {
		at := ev.LastTimestamp
		if at.IsZero() {
			at = metav1.Time{Time: ev.EventTime.Time}
		}
		if at.IsZero() {
			at = ev.CreationTimestamp
		}
		k := ev.InvolvedObject.Kind + "/" + ev.InvolvedObject.Name
		if cur, ok := best[k]; !ok || cur.at.Before(&at) {
			best[k] = latest{at: at, msg: oneLine(ev.Message)}
		}
	}
	out := make(map[string]string, len(best))
	at := make(map[string]time.Time, len(best))
	for k, v := range best {
		out[k], at[k] = v.msg, v.at.Time
	}
	return out, at, nil
}

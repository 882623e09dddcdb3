package cli

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/muster-io/muster/api"
)

// Native gangs are Kubernetes' own PodGroups (scheduling.k8s.io/v1beta1,
// gate GenericWorkload): a pod joins one through
// spec.schedulingGroup.podGroupName, set when it is created, and the
// scheduler's in-tree GangScheduling plugin places the group all or nothing.
// In native mode the pod-grouper writes one per gang (docs/native-gangs.md);
// the Job controller (WorkloadWithJob), a controller of its own or a user
// may write them too. The CLI shows them in the model of scheduler-plugins
// PodGroups (podGroupInfo, GangView, fitGang): found through the pods that
// name them, and through the workload-uid label (or an owner reference) for
// a gang whose pods do not exist yet. A cluster that does not serve the API
// has none, and every command then behaves as without native gangs.

var nativePodGroupGK = schema.GroupKind{Group: "scheduling.k8s.io", Kind: "PodGroup"}

const (
	nativePodGroupVersion    = "v1beta1"
	nativePodGroupAPIVersion = "scheduling.k8s.io/v1beta1"
	// nativeKeyPrefix keys native PodGroups apart from scheduler-plugins
	// ones of the same name where both are counted together (get); ":"
	// is in no object name.
	nativeKeyPrefix = "native:"
)

// nativeGroupOf is the native PodGroup pod names, "" for none.
func nativeGroupOf(p *corev1.Pod) string {
	if sg := p.Spec.SchedulingGroup; sg != nil && sg.PodGroupName != nil {
		return *sg.PodGroupName
	}
	return ""
}

// podGangKey returns how get keys a pod's gang among pgs: by the native
// PodGroup it names when that is one of pgs (the scheduler follows
// spec.schedulingGroup before a label), else by the scheduler-plugins
// PodGroup it is labelled with, as without native gangs; "" for none.
func podGangKey(pgs []*podGroupInfo) func(*corev1.Pod) string {
	native := map[string]bool{}
	for _, pg := range pgs {
		if pg.Native {
			native[pg.Name] = true
		}
	}
	return func(p *corev1.Pod) string {
		if n := nativeGroupOf(p); n != "" && native[n] {
			return nativeKeyPrefix + n
		}
		return p.Labels[api.LabelPodGroup]
	}
}

// key is the PodGroup's key in podGangKey's terms.
func (pg *podGroupInfo) key() string {
	if pg.Native {
		return nativeKeyPrefix + pg.Name
	}
	return pg.Name
}

// readNativePodGroups lists the native PodGroups of ns (every namespace
// for ""); served is false when the cluster does not serve
// scheduling.k8s.io/v1beta1 PodGroups: discovery does not know the kind, or
// the server answers NotFound (the API turned off since discovery was
// cached). Callers then behave as on a cluster without native gangs.
func readNativePodGroups(ctx context.Context, c *Cluster, ns string) (pgs []schedulingv1beta1.PodGroup, served bool, err error) {
	if _, err := c.Mapper.RESTMapping(nativePodGroupGK, nativePodGroupVersion); err != nil {
		return nil, false, nil
	}
	list, err := c.Kube.SchedulingV1beta1().PodGroups(ns).List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsNotFound(err), meta.IsNoMatchError(err):
		return nil, false, nil
	case err != nil:
		return nil, true, err
	}
	return list.Items, true, nil
}

// listNativePodGroups is readNativePodGroups with an error worded for a
// warning.
func listNativePodGroups(ctx context.Context, c *Cluster, ns string) ([]schedulingv1beta1.PodGroup, bool, error) {
	pgs, served, err := readNativePodGroups(ctx, c, ns)
	if err != nil {
		return nil, served, fmt.Errorf("list native PodGroups (%s): %v", nativePodGroupAPIVersion, err)
	}
	return pgs, served, nil
}

// nativePodGroupFrom reads what describe, get and fit show of a native
// PodGroup. A group of the basic policy is no gang (its pods are placed
// one by one): MinMember 1.
func nativePodGroupFrom(pg *schedulingv1beta1.PodGroup) *podGroupInfo {
	info := &podGroupInfo{Name: pg.Name, Native: true, MinMember: 1, Basic: true,
		Definition: pg.Labels[api.LabelDefinition], Priority: pg.Spec.Priority, PriorityClass: pg.Spec.PriorityClassName}
	if g := pg.Spec.SchedulingPolicy.Gang; g != nil {
		info.Basic = false
		info.MinMember = max(g.MinCount, 1)
	}
	if sc := pg.Spec.SchedulingConstraints; sc != nil && len(sc.Topology) > 0 {
		info.TopologyRequired = sc.Topology[0].Key
	}
	if c := meta.FindStatusCondition(pg.Status.Conditions, schedulingv1beta1.PodGroupInitiallyScheduled); c != nil {
		cv := ConditionView{Type: c.Type, Status: string(c.Status), Reason: c.Reason, Message: oneLine(c.Message)}
		info.InitiallyScheduled = &cv
	}
	info.Phase = nativePhase(info)
	return info
}

// nativePhase is a native PodGroup's phase as the gang table shows it:
// what its PodGroupInitiallyScheduled condition says ("Scheduled" once
// True, which it stays; else the reason, "Unschedulable" or
// "SchedulerError"), "" while the scheduler has not tried it.
func nativePhase(pg *podGroupInfo) string {
	c := pg.InitiallyScheduled
	switch {
	case c == nil:
		return ""
	case c.Status == string(metav1.ConditionTrue):
		return "Scheduled"
	case c.Reason != "":
		return c.Reason
	}
	return "Pending"
}

// workloadNativePodGroups keeps the native PodGroups of root: those its
// pods name, those labelled with its UID (api.LabelWorkloadUID, the
// pod-grouper's, also before any pod exists) and those it owns (the Job
// controller's on a root Job).
func workloadNativePodGroups(root *unstructured.Unstructured, pgs []schedulingv1beta1.PodGroup, pods []*corev1.Pod) map[string]*podGroupInfo {
	named := nativeNames(pods)
	out := map[string]*podGroupInfo{}
	for i := range pgs {
		pg := &pgs[i]
		mine := named[pg.Name] || (root.GetUID() != "" && pg.Labels[api.LabelWorkloadUID] == string(root.GetUID()))
		for _, r := range pg.OwnerReferences {
			mine = mine || r.UID == root.GetUID()
		}
		if mine {
			out[pg.Name] = nativePodGroupFrom(pg)
		}
	}
	return out
}

// nativeNames is the set of native PodGroups pods name.
func nativeNames(pods []*corev1.Pod) map[string]bool {
	out := map[string]bool{}
	for _, p := range pods {
		if n := nativeGroupOf(p); n != "" {
			out[n] = true
		}
	}
	return out
}

// podsByNativePodGroup maps each native PodGroup of the workload (found,
// or only named by its pods: a missing one still has members) to every
// pod of the namespace naming it: the scheduler counts a gang over all of
// them.
func podsByNativePodGroup(pods []corev1.Pod, pgs map[string]*podGroupInfo, mine []*corev1.Pod) map[string][]*corev1.Pod {
	want := nativeNames(mine)
	for n := range pgs {
		want[n] = true
	}
	out := map[string][]*corev1.Pod{}
	for i := range pods {
		if n := nativeGroupOf(&pods[i]); n != "" && want[n] {
			out[n] = append(out[n], &pods[i])
		}
	}
	return out
}

// nativeGroupNames lists, sorted, the native PodGroups pods name.
func nativeGroupNames(pods []*corev1.Pod) []string {
	set := nativeNames(pods)
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// addNativePodGroups gives each workload of wls its native PodGroups: the
// ones it owns, the ones labelled with its UID, the ones its pods name. A
// PodGroup of the basic policy is no gang and is left out. As with
// scheduler-plugins PodGroups, a list that fails is a warning.
func (o *GetOptions) addNativePodGroups(ctx context.Context, c *Cluster, ns string, wls []listedWorkload, byUID map[types.UID]int) {
	pgs, _, err := readNativePodGroups(ctx, c, ns)
	if err != nil {
		o.env.warnf("cannot list native PodGroups (%s): %v", nativePodGroupAPIVersion, err)
		return
	}
	if len(pgs) == 0 {
		return
	}
	named := map[types.NamespacedName]int{}
	for wi := range wls {
		for _, p := range wls[wi].pods {
			if n := nativeGroupOf(p); n != "" {
				named[types.NamespacedName{Namespace: p.Namespace, Name: n}] = wi
			}
		}
	}
	for i := range pgs {
		pg := &pgs[i]
		wi, ok := named[types.NamespacedName{Namespace: pg.Namespace, Name: pg.Name}]
		if uid := pg.Labels[api.LabelWorkloadUID]; !ok && uid != "" {
			wi, ok = byUID[types.UID(uid)]
		}
		for _, r := range pg.OwnerReferences {
			if ok {
				break
			}
			wi, ok = byUID[r.UID]
		}
		if info := nativePodGroupFrom(pg); ok && !info.Basic {
			wls[wi].pgs = append(wls[wi].pgs, info)
		}
	}
}

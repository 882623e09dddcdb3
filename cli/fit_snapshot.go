package cli

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/pager"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/muster-io/muster/plugins/gang/planfilter"
)

// fitSnapshot is the cluster as the scheduler's cache holds it: every node
// with the pods bound to it that have not finished. Gangs fit places are
// added to it, so each gang sees what the previous ones left.
type fitSnapshot struct {
	infos    []fwk.NodeInfo
	byName   map[string]*framework.NodeInfo
	gpuNames []corev1.ResourceName
	pods     int
	// added are the pods fit placed: they do not exist, and are never
	// victims.
	added map[types.UID]bool

	// preemption: a gang that does not fit now is searched victims for.
	preemption bool
	cluster    *Cluster
	lists      *preemptionLists
	// nominated are the pending pods nominated on each node.
	nominated map[string][]fwk.PodInfo
	// sched is the scheduler profile whose filters judge each node.
	sched *schedProfile
	// filters runs sched's plugins over infos.
	filters *planfilter.Profile
}

// fitPageSize bounds one list response; a cluster of 10,000 pods is read
// in 20 pages.
const fitPageSize = 500

// takeSnapshot lists the nodes and the unfinished pods: those bound, and
// those nominated to a node.
func takeSnapshot(ctx context.Context, c *Cluster, gpuNames []corev1.ResourceName) (*fitSnapshot, error) {
	s := &fitSnapshot{byName: map[string]*framework.NodeInfo{}, gpuNames: gpuNames, added: map[types.UID]bool{}, cluster: c,
		nominated: map[string][]fwk.PodInfo{}}
	var nodes []*corev1.Node
	np := pager.New(pager.SimplePageFunc(func(opts metav1.ListOptions) (runtime.Object, error) {
		return c.Kube.CoreV1().Nodes().List(ctx, opts)
	}))
	np.PageSize = fitPageSize
	if err := np.EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
		n, ok := obj.(*corev1.Node)
		if !ok {
			return fmt.Errorf("list nodes: got %T", obj)
		}
		nodes = append(nodes, n)
		return nil
	}); err != nil {
		return nil, apiError("list nodes", err)
	}
	// The scheduler's own selection of the pods that take room: assigned
	// to a node and not finished (terminating pods still hold theirs).
	// Pending pods come in the same list for their nominations: the
	// scheduler's filters count a pod nominated on a node there (a
	// preemptor waiting for its victims), and so does the plan
	// (plan.AvoidNominated).
	byNode := map[string][]*corev1.Pod{}
	pp := pager.New(pager.SimplePageFunc(func(opts metav1.ListOptions) (runtime.Object, error) {
		return c.Kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, opts)
	}))
	pp.PageSize = fitPageSize
	sel := "status.phase!=" + string(corev1.PodSucceeded) + ",status.phase!=" + string(corev1.PodFailed)
	if err := pp.EachListItem(ctx, metav1.ListOptions{FieldSelector: sel}, func(obj runtime.Object) error {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return fmt.Errorf("list pods: got %T", obj)
		}
		// Fake clients ignore field selectors: check again.
		switch {
		case p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed:
		case p.Spec.NodeName != "":
			byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p)
		case p.Status.NominatedNodeName != "" && p.DeletionTimestamp == nil:
			pi, err := framework.NewPodInfo(p)
			if err != nil {
				return fmt.Errorf("pod %s/%s: %w", p.Namespace, p.Name, err)
			}
			s.nominated[p.Status.NominatedNodeName] = append(s.nominated[p.Status.NominatedNodeName], pi)
		}
		return nil
	}); err != nil {
		return nil, apiError("list pods", err)
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	for _, n := range nodes {
		ni := framework.NewNodeInfo(byNode[n.Name]...)
		ni.SetNode(n)
		s.infos = append(s.infos, ni)
		s.byName[n.Name] = ni
		s.pods += len(byNode[n.Name])
	}
	return s, nil
}

// gpus returns the allocatable and free GPUs of a node.
func (s *fitSnapshot) gpus(ni fwk.NodeInfo) (alloc, free int64) {
	a, r := ni.GetAllocatable().GetScalarResources(), ni.GetRequested().GetScalarResources()
	for _, n := range s.gpuNames {
		alloc += a[n]
		free += a[n] - r[n]
	}
	return alloc, free
}

// totals sums GPUs over the cluster: allocatable, free, and nodes whose
// GPUs are partly allocated.
func (s *fitSnapshot) totals() (alloc, free int64, partial int) {
	for _, ni := range s.infos {
		a, f := s.gpus(ni)
		alloc += a
		free += max(f, 0)
		if a > 0 && f > 0 && f < a {
			partial++
		}
	}
	return alloc, free, partial
}

// nominatedOn lists the pods nominated on node that fit has not placed
// (a member fit placed is bound in the snapshot).
func (s *fitSnapshot) nominatedOn(node string) []fwk.PodInfo {
	return s.nominated[node]
}

package plan

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// AvoidNominated returns a plan that leaves room for the pods nominated on
// its nodes, or why the gang has none.
//
// The framework's filters count, on each node, the pods nominated there of
// the member's priority or more (a preemptor waiting for its victims to go,
// a pod another profile is binding); the planner sees the node's pods only.
// A plan onto such room fails at the member's Filter. So a plan that
// overcommits a node with them is made once more with them counted as held,
// and when that finds no placement the gang has none: a plan kept onto that
// room failed its node, the gang was released and planned there again at
// once, every few milliseconds, and the nominated pods behind it in the
// queue were never tried, so stale nominations were never cleared
// (TestFaultStaleNominations). A nomination that goes, stale or not,
// changes the pod's status, which the queue reports as a pod leaving its
// node: the capacity hint then queues the gang again.
// nominated lists the pods nominated on a node, whole; pod is the member
// being scheduled (its priority decides which nominated pods count). The
// gang plugin and muster fit both run it after Compute.
func AvoidNominated(ctx context.Context, req Request, result *Plan, pod *v1.Pod, nominated func(node string) []fwk.PodInfo) (*Plan, error) {
	counted := nominatedCounter(req, pod)
	if !overcommitsNominated(req, result, counted, nominated) {
		return result, nil
	}
	var names []string
	req.Held, names = holdNominated(req, counted, nominated)
	again, err := Compute(ctx, req)
	var noPlace *NoPlacementError
	if errors.As(err, &noPlace) {
		noPlace.Message += nominatedNote(names)
		return nil, noPlace
	}
	if err != nil {
		return nil, err
	}
	klog.FromContext(ctx).V(3).Info("Planned gang around pods nominated on its first plan's nodes", "gang", req.Gang)
	return again, nil
}

// holdNominated returns req.Held plus, on every node of req, the nominated
// pods counted accepts, and the names of those pods. req.Held's slices
// belong to the caller: a node with such pods gets a new one.
func holdNominated(req Request, counted func(*v1.Pod, string) bool, nominated func(string) []fwk.PodInfo) (map[string][]fwk.PodInfo, []string) {
	held := maps.Clone(req.Held)
	if held == nil {
		held = map[string][]fwk.PodInfo{}
	}
	var names []string
	for _, ni := range req.Nodes {
		name := ni.Node().Name
		var add []fwk.PodInfo
		for _, pi := range nominated(name) {
			if counted(pi.GetPod(), name) {
				add = append(add, pi)
				names = append(names, klog.KObj(pi.GetPod()).String())
			}
		}
		if len(add) > 0 {
			held[name] = slices.Concat(req.Held[name], add)
		}
	}
	return held, names
}

// maxNominatedNames bounds the pods a refusal names.
const maxNominatedNames = 3

// nominatedNote says, in a refusal, that nominated pods' room counted as
// used: the node's free room alone would not explain it.
func nominatedNote(names []string) string {
	if len(names) == 0 {
		return ""
	}
	slices.Sort(names)
	shown := names[:min(len(names), maxNominatedNames)]
	more := ""
	if n := len(names) - len(shown); n > 0 {
		more = fmt.Sprintf(" and %d more", n)
	}
	pods := "pods"
	if len(names) == 1 {
		pods = "pod"
	}
	return fmt.Sprintf("; counting as used the room of %d %s nominated to these nodes (%s%s)", len(names), pods, strings.Join(shown, ", "), more)
}

// nominatedCounter returns which nominated pods the framework's filters
// count against pod on a node: those of pod's priority or more, not pod's
// gang's pending members (their nominations elsewhere are dropped with the
// plan) and not already held there for another gang's plan.
func nominatedCounter(req Request, pod *v1.Pod) func(*v1.Pod, string) bool {
	prio := corev1helpers.PodPriority(pod)
	skip := make(map[types.UID]bool, len(req.Pending))
	for _, m := range req.Pending {
		skip[m.UID] = true
	}
	return func(n *v1.Pod, node string) bool {
		if skip[n.UID] || corev1helpers.PodPriority(n) < prio {
			return false
		}
		for _, h := range req.Held[node] {
			if h.GetPod().UID == n.UID {
				return false
			}
		}
		return true
	}
}

// overcommitsNominated reports whether a node of result lacks room, by
// resources, for the members planned there together with what other plans
// hold and the counted pods nominated there. Only the plan's nodes are
// asked, and members' pod infos are built only for a node with such pods:
// most plans meet none.
func overcommitsNominated(req Request, result *Plan, counted func(*v1.Pod, string) bool, nominated func(string) []fwk.PodInfo) bool {
	nodes := map[string]bool{}
	for _, node := range result.Assignments {
		nodes[node] = true
	}
	for node := range nodes {
		var all []fwk.PodInfo
		for _, pi := range nominated(node) {
			if counted(pi.GetPod(), node) {
				all = append(all, pi)
			}
		}
		if len(all) == 0 {
			continue
		}
		ni := nodeNamed(req.Nodes, node)
		if ni == nil {
			continue
		}
		all = append(all, req.Held[node]...)
		for _, m := range req.Pending {
			if result.Assignments[m.UID] != node {
				continue
			}
			pi, err := framework.NewPodInfo(m)
			if err != nil {
				return false
			}
			all = append(all, pi)
		}
		if !FitsResources(ni, all, req.Devices) {
			return true
		}
	}
	return false
}

// nodeNamed is the node of nodes named name, or nil.
func nodeNamed(nodes []fwk.NodeInfo, name string) fwk.NodeInfo {
	for _, ni := range nodes {
		if n := ni.Node(); n != nil && n.Name == name {
			return ni
		}
	}
	return nil
}

// HoldNominated returns req.Held plus the pods nominated on req's nodes that
// count against pod (see AvoidNominated), and their names: what a victim
// search must leave room for.
func HoldNominated(req Request, pod *v1.Pod, nominated func(node string) []fwk.PodInfo) (map[string][]fwk.PodInfo, []string) {
	return holdNominated(req, nominatedCounter(req, pod), nominated)
}

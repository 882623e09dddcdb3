package victims

import (
	"context"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/plugins/gang/plan"
)

// RemoveFromNodes returns the snapshot with the removed pods taken off their
// nodes; only the nodes that change are copied.
func RemoveFromNodes(logger klog.Logger, nodes []fwk.NodeInfo, removed map[types.UID]bool) []fwk.NodeInfo {
	out, _ := removeFromNodes(logger, nodes, removed)
	return out
}

// removeFromNodes is RemoveFromNodes that also returns the pods it took
// off, with their nodes as they were: a planner's filter built on the
// scheduler's snapshot forgets them too (plan.Request.Removed).
func removeFromNodes(logger klog.Logger, nodes []fwk.NodeInfo, removed map[types.UID]bool) ([]fwk.NodeInfo, []plan.PodOnNode) {
	if len(removed) == 0 {
		return nodes, nil
	}
	out := make([]fwk.NodeInfo, len(nodes))
	var gone []plan.PodOnNode
	for i, ni := range nodes {
		out[i] = ni
		var drop []fwk.PodInfo
		for _, pi := range ni.GetPods() {
			if removed[pi.GetPod().UID] {
				drop = append(drop, pi)
				gone = append(gone, plan.PodOnNode{Pod: pi, Node: ni})
			}
		}
		if len(drop) == 0 {
			continue
		}
		clone := ni.Snapshot()
		for _, pi := range drop {
			if err := clone.RemovePod(logger, pi.GetPod()); err != nil {
				logger.V(4).Info("Removing a victim from a node copy", "pod", klog.KObj(pi.GetPod()), "err", err)
			}
		}
		out[i] = clone
	}
	return out, gone
}

// Describe names the units for events and messages, capped.
func Describe(units []*Unit) string {
	names := make([]string, 0, len(units))
	for _, u := range units {
		names = append(names, fmt.Sprintf("%s (priority %d, %d pods)", u.Key, u.Priority, len(u.Pods)))
	}
	return api.CapReason(strings.Join(names, ", "))
}

// Find runs the victim search for a preemptor whose pending members and
// snapshot are req, with the units in's lookups make (in.Nodes defaults to
// req.Nodes). Pods already being deleted (earlier victims, or anything
// else terminating) count as gone: room they free is not paid for twice
// with new victims. It returns how many such pods the result relies on.
// A result without units means the preemptor fits without eviction (once
// the terminating pods are gone, when there are any).
func Find(ctx context.Context, req plan.Request, in Input) (*Result, int, error) {
	logger := klog.FromContext(ctx)
	terminating := map[types.UID]bool{}
	for _, ni := range req.Nodes {
		for _, pi := range ni.GetPods() {
			if pi.GetPod().DeletionTimestamp != nil {
				terminating[pi.GetPod().UID] = true
			}
		}
	}
	if in.Nodes == nil {
		in.Nodes = req.Nodes
	}
	base, gone := removeFromNodes(logger, req.Nodes, terminating)
	res, err := Search(ctx, Build(in), func(ctx context.Context, removed map[types.UID]bool) (*plan.Plan, error) {
		r := req
		var victims []plan.PodOnNode
		r.Nodes, victims = removeFromNodes(logger, base, removed)
		// The filters' own view of the cluster (affinity and spread
		// counts) loses the victims and terminating pods too.
		r.Removed = append(append(append([]plan.PodOnNode(nil), req.Removed...), gone...), victims...)
		return plan.Compute(ctx, r)
	}, NewShortfall(req.Pending, base))
	return res, len(terminating), err
}

// Pods are the units' pods, each once.
func Pods(units []*Unit) []*v1.Pod {
	seen := map[types.UID]bool{}
	var out []*v1.Pod
	for _, u := range units {
		for _, pi := range u.Pods {
			if pod := pi.GetPod(); !seen[pod.UID] {
				seen[pod.UID] = true
				out = append(out, pod)
			}
		}
	}
	return out
}

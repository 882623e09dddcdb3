package cli

import (
	"context"
	"errors"
	"sort"

	"github.com/muster-io/muster/definition"
	"github.com/muster-io/muster/plugins/gang/plan"
)

// place places every gang of every workload in order and reports.
func (s *fitSnapshot) place(ctx context.Context, workloads []*fitWorkload) (*ClusterFit, error) {
	filters, notEvaluated, err := s.profile(ctx, workloads)
	if err != nil {
		return nil, err
	}
	s.filters = filters
	cf := &ClusterFit{Nodes: len(s.infos), BoundPods: s.pods, Fits: true, Workloads: []WorkloadFit{}, Warnings: []string{},
		Profile: s.sched.source + ", profile " + filters.SchedulerName, NotEvaluated: append([]string{}, notEvaluated...)}
	cf.GPUs, cf.GPUsFree, cf.PartialGPUNodes = s.totals()
	// fitsSome: every gang so far fits now or after preempting.
	fitsSome := true
	for _, w := range workloads {
		wf := WorkloadFit{Kind: w.root.GetKind(), APIVersion: w.root.GetAPIVersion(), Namespace: w.ns, Name: w.root.GetName(),
			Definition: w.def, Source: w.source, Note: w.note, Fits: true, Gangs: []GangFit{}}
		wfSome := true
		for _, g := range w.gangs {
			gf, err := s.placeGang(ctx, g)
			if err != nil {
				return nil, err
			}
			wf.Fits = wf.Fits && gf.Fits
			wfSome = wfSome && (gf.Fits || gf.FitsAfterPreempting)
			for _, v := range gf.Victims {
				cf.VictimUnits++
				cf.VictimPods += v.Pods
				cf.VictimGPUs += v.GPUs
			}
			wf.Gangs = append(wf.Gangs, gf)
		}
		wf.FitsAfterPreempting = !wf.Fits && wfSome
		switch {
		case len(w.gangs) == 0:
			wf.Verdict = verdictNoGang
			wf.Note = "no gang: muster-scheduler places its pods one by one; fit evaluates gangs only"
		case wf.Fits:
			wf.Verdict = verdictFits
		case wf.FitsAfterPreempting:
			wf.Verdict = verdictPreempt
		default:
			wf.Verdict = verdictNoFit
		}
		cf.Fits = cf.Fits && wf.Fits
		fitsSome = fitsSome && wfSome
		cf.Workloads = append(cf.Workloads, wf)
	}
	cf.FitsAfterPreempting = !cf.Fits && fitsSome
	cf.Verdict = clusterVerdict(cf)
	if s.lists != nil {
		cf.Warnings = append(cf.Warnings, s.lists.warnings...)
	}
	_, cf.GPUsFreeAfter, cf.PartialGPUNodesAfter = s.totals()
	return cf, nil
}

// placeGang runs the planner for one gang and, when it fits, adds its
// members to the snapshot on their nodes.
func (s *fitSnapshot) placeGang(ctx context.Context, g *fitGang) (GangFit, error) {
	gf := GangFit{Name: g.name, PodGroup: g.podGroup, Definition: g.definition, MinMember: g.minMember, Native: g.native,
		Members: len(g.pending) + len(g.placed), Bound: len(g.placed), Assignments: []MemberFit{}, Nodes: []NodeFit{}, Victims: []VictimFit{}}
	if g.topology.Key != "" {
		gf.Topology = &TopologyFit{Key: g.topology.Key, Required: g.topology.Required}
	}
	if n := len(g.pending) + len(g.placed); g.blocked == "" && n < g.minMember {
		// The plugin does not plan a gang whose members do not all exist
		// yet; its own words.
		g.blocked = plan.WaitingForMembers(g.key, n, g.minMember)
		if g.native {
			g.blocked = nativeWaitingForMembers(g.key, n, g.minMember)
		}
		g.blockedVerdict = verdictUnknown
	}
	if g.blocked != "" {
		gf.Verdict, gf.Reason = g.blockedVerdict, g.blocked
		return gf, nil
	}
	req := plan.Request{
		Gang: g.key, MinMember: g.minMember, Pending: g.pending, Placed: g.placed,
		Nodes: s.infos, Topology: g.topology,
		// A Filter per gang: its PreFilter results hold for the snapshot
		// as the gangs before left it.
		Filter: s.filters.Filter(),
	}
	res, err := plan.Compute(ctx, req)
	if err == nil && len(g.pending) > 0 {
		// As the plugin does: room held for pods nominated on the plan's
		// nodes is not the gang's (the first member's priority decides
		// which of them count; all of a gang's should have one).
		res, err = plan.AvoidNominated(ctx, req, res, g.pending[0], s.nominatedOn)
	}
	// before: free GPUs per node before the gang (and its victims);
	// evicted: GPUs its victims free there.
	before, evicted := map[string]int64{}, map[string]int64{}
	var noPlace *plan.NoPlacementError
	switch {
	case errors.As(err, &noPlace):
		gf.Verdict, gf.Reason = verdictNoFit, noPlace.Message
		if !s.preemption {
			return gf, nil
		}
		// Free GPUs before the victims go: the node table shows both.
		for _, ni := range s.infos {
			_, before[ni.Node().Name] = s.gpus(ni)
		}
		if res, err = s.preempt(ctx, g, req, &gf); err != nil || res == nil {
			return gf, err
		}
		gf.FitsAfterPreempting, gf.Verdict = true, verdictPreempt
	case err != nil:
		return gf, err
	default:
		gf.Fits, gf.Verdict = true, verdictFits
	}
	if gf.Topology != nil {
		gf.Topology.Domain, gf.Topology.Relaxed = res.Domain, res.Relaxed
	}
	perNode := map[string][]string{}
	for _, p := range g.pending {
		node, ok := res.Assignments[p.UID]
		if !ok {
			continue
		}
		ni := s.byName[node]
		if _, seen := before[node]; !seen {
			_, before[node] = s.gpus(ni)
		}
		if _, seen := evicted[node]; !seen {
			_, free := s.gpus(ni)
			evicted[node] = free - before[node]
		}
		bound := p.DeepCopy()
		bound.Spec.NodeName = node
		ni.AddPod(bound)
		s.added[bound.UID] = true
		gpus := definition.GPUs(definition.PodRequests(&p.Spec), s.gpuNames)
		gf.Assignments = append(gf.Assignments, MemberFit{Pod: p.Name, Node: node, GPUs: gpus})
		perNode[node] = append(perNode[node], p.Name)
	}
	sort.SliceStable(gf.Assignments, func(i, j int) bool { return gf.Assignments[i].Node < gf.Assignments[j].Node })
	for node, members := range perNode {
		ni := s.byName[node]
		alloc, after := s.gpus(ni)
		nf := NodeFit{Name: node, GPUs: alloc, GPUsFree: before[node], GPUsFreed: evicted[node], GPUsFreeAfter: after, Members: members}
		if g.topology.Key != "" {
			nf.Domain = ni.Node().Labels[g.topology.Key]
		}
		gf.Nodes = append(gf.Nodes, nf)
	}
	sort.Slice(gf.Nodes, func(i, j int) bool { return gf.Nodes[i].Name < gf.Nodes[j].Name })
	return gf, nil
}

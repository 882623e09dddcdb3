package cli

import (
	"sort"
)

// rankClusters orders clusters best first and numbers them: fits now, then
// fits after preempting (the fewest pods, then GPUs, evicted first), then
// does not fit; within each, the fewest nodes with partly allocated GPUs
// after placement, then the order given; clusters with an error last.
func rankClusters(cs []*ClusterFit, preemption string) *FitReport {
	class := func(c *ClusterFit) int {
		switch {
		case c.Error != "":
			return 3
		case c.Fits:
			return 0
		case c.FitsAfterPreempting:
			return 1
		}
		return 2
	}
	sort.SliceStable(cs, func(i, j int) bool {
		a, b := cs[i], cs[j]
		if ca, cb := class(a), class(b); ca != cb {
			return ca < cb
		}
		if a.FitsAfterPreempting && a.VictimPods != b.VictimPods {
			return a.VictimPods < b.VictimPods
		}
		if a.FitsAfterPreempting && a.VictimGPUs != b.VictimGPUs {
			return a.VictimGPUs < b.VictimGPUs
		}
		return a.PartialGPUNodesAfter < b.PartialGPUNodesAfter
	})
	r := &FitReport{Preemption: preemption, Clusters: make([]ClusterFit, len(cs))}
	for i, c := range cs {
		c.Rank = i + 1
		r.Clusters[i] = *c
	}
	return r
}

// FitReport is the JSON and YAML output of muster fit (stable: fields are
// added, never renamed). cli/README.md documents every field.
type FitReport struct {
	// Preemption is "evaluated" (a gang that does not fit now is searched
	// victims for, as muster-scheduler would) or "not evaluated"
	// (--no-preemption: a gang that would fit only by evicting others
	// shows as not fitting).
	Preemption string `json:"preemption"`
	// Clusters are ranked, best first.
	Clusters []ClusterFit `json:"clusters"`
}

// ClusterFit is the verdict on one cluster.
type ClusterFit struct {
	Rank int `json:"rank"`
	// Context is the kubeconfig context ("" when unknown).
	Context string `json:"context"`
	// Error is set when the cluster could not be evaluated; the rest is
	// then empty.
	Error string `json:"error,omitempty"`
	// Verdict: "fits now", "fits after preempting", "does not fit" or
	// "error".
	Verdict string `json:"verdict"`
	// Fits: every gang of every workload fits now.
	Fits bool `json:"fits"`
	// FitsAfterPreempting: not every gang fits now, but every one does,
	// some after preempting their Victims.
	FitsAfterPreempting bool `json:"fitsAfterPreempting"`
	// VictimUnits, VictimPods and VictimGPUs sum the gangs' victims: what
	// the ranking minimises among clusters that fit after preempting.
	VictimUnits int   `json:"victimUnits"`
	VictimPods  int   `json:"victimPods"`
	VictimGPUs  int64 `json:"victimGPUs"`
	Nodes       int   `json:"nodes"`
	BoundPods   int   `json:"boundPods"`
	GPUs        int64 `json:"gpus"`
	GPUsFree    int64 `json:"gpusFree"`
	// GPUsFreeAfter and PartialGPUNodesAfter are after placing the gangs
	// that fit.
	GPUsFreeAfter int64 `json:"gpusFreeAfter"`
	// PartialGPUNodes counts nodes with some but not all GPUs allocated:
	// the fragmentation the ranking minimises.
	PartialGPUNodes      int           `json:"partialGPUNodes"`
	PartialGPUNodesAfter int           `json:"partialGPUNodesAfter"`
	Workloads            []WorkloadFit `json:"workloads"`
	Warnings             []string      `json:"warnings"`
	// Profile is the scheduler configuration and profile whose filters
	// judged the nodes.
	Profile string `json:"profile,omitempty"`
	// NotEvaluated are the checks of the scheduler that could not be made
	// on the snapshot, each with why.
	NotEvaluated []string `json:"notEvaluated"`
}

// WorkloadFit is the verdict on one workload.
type WorkloadFit struct {
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	Definition string `json:"definition"`
	// Source: "file" (-f), "live" (the PodGroups and pods of a submitted
	// workload) or "spec" (a submitted workload's spec: no pod in a
	// PodGroup yet, or read from another context).
	Source string `json:"source"`
	// Verdict: "fits now", "fits after preempting", "does not fit" or "no
	// gang".
	Verdict string `json:"verdict"`
	Fits    bool   `json:"fits"`
	// FitsAfterPreempting: some gang fits only after preempting, every
	// other fits now.
	FitsAfterPreempting bool   `json:"fitsAfterPreempting"`
	Note                string `json:"note,omitempty"`
	// Queue is Kueue's side, for a workload submitted to it: whether its
	// ClusterQueue has the quota.
	Queue *QueueFit `json:"queue,omitempty"`
	Gangs []GangFit `json:"gangs"`
}

// GangFit is the verdict on one gang.
type GangFit struct {
	// Name is the PodGroup's name; for a grouped gang not created yet a
	// stand-in "<workload>-<gang>[i]" (PodGroup is then "").
	Name       string `json:"name"`
	PodGroup   string `json:"podGroup"`
	Definition string `json:"definition"`
	// Native: PodGroup is a native one (scheduling.k8s.io/v1beta1) its
	// members name in spec.schedulingGroup, placed by the scheduler's
	// in-tree GangScheduling plugin; MinMember is its minCount.
	Native    bool `json:"native,omitempty"`
	MinMember int  `json:"minMember"`
	// Members counts the gang's pods; Bound those already on a node.
	Members int `json:"members"`
	Bound   int `json:"bound"`
	// Verdict: "fits now", "fits after preempting", "does not fit" or
	// "not evaluated".
	Verdict string `json:"verdict"`
	// Fits: the gang fits now.
	Fits bool `json:"fits"`
	// FitsAfterPreempting: the gang fits once Victims are evicted;
	// Assignments and Nodes are the placement then.
	FitsAfterPreempting bool `json:"fitsAfterPreempting"`
	// Reason is the scheduler's message when the gang does not fit now.
	Reason string `json:"reason,omitempty"`
	// Priority and PriorityClass are the gang's, as the scheduler would
	// read them; set when preemption was evaluated for the gang.
	Priority      *int32 `json:"priority,omitempty"`
	PriorityClass string `json:"priorityClass,omitempty"`
	// Preemption says why nothing would be preempted for a gang that does
	// not fit now, in the scheduler's words ("preemption would not help:
	// ...", "not preempting: preemptionPolicy is Never"), or why it was not
	// evaluated.
	Preemption string `json:"preemption,omitempty"`
	// Victims are the units muster-scheduler would evict, whole, for a
	// gang that fits after preempting.
	Victims     []VictimFit  `json:"victims"`
	Topology    *TopologyFit `json:"topology,omitempty"`
	Assignments []MemberFit  `json:"assignments"`
	Nodes       []NodeFit    `json:"nodes"`
}

// TopologyFit is a gang's domain constraint and the domain chosen.
type TopologyFit struct {
	Key      string `json:"key"`
	Required bool   `json:"required"`
	// Domain is the label value all members got ("" when relaxed).
	Domain string `json:"domain"`
	// Relaxed: a preferred constraint no single domain could meet.
	Relaxed bool `json:"relaxed"`
}

// MemberFit is one pending member and its node.
type MemberFit struct {
	Pod  string `json:"pod"`
	Node string `json:"node"`
	GPUs int64  `json:"gpus"`
}

// NodeFit is one node the gang uses, with its GPUs before and after the
// gang's members.
type NodeFit struct {
	Name     string `json:"name"`
	Domain   string `json:"domain,omitempty"`
	GPUs     int64  `json:"gpus"`
	GPUsFree int64  `json:"gpusFree"`
	// GPUsFreed are the GPUs the gang's victims free on the node.
	GPUsFreed     int64    `json:"gpusFreed,omitempty"`
	GPUsFreeAfter int64    `json:"gpusFreeAfter"`
	Members       []string `json:"members"`
}

package cli

import "testing"

// TestFitVerdict: the gangs table's line says what fit says — fits now and
// where, the victims to preempt, or why not — with Kueue's quota first
// when the workload waits for it.
func TestFitVerdict(t *testing.T) {
	one := func(w WorkloadFit, victimPods int, victimGPUs int64) *FitReport {
		return &FitReport{Clusters: []ClusterFit{{VictimPods: victimPods, VictimGPUs: victimGPUs, Workloads: []WorkloadFit{w}}}}
	}
	for _, tc := range []struct {
		name    string
		r       *FitReport
		verdict string
		summary string
	}{
		{"empty", &FitReport{}, verdictUnknown, "fit evaluated no workload"},
		{"fits", one(WorkloadFit{Verdict: verdictFits, Gangs: []GangFit{{Verdict: verdictFits, Nodes: []NodeFit{{Name: "a"}, {Name: "b"}}}, {Verdict: verdictFits, Nodes: []NodeFit{{Name: "b"}}}}}, 0, 0),
			verdictFits, "fits now, on 2 nodes"},
		{"preempt", one(WorkloadFit{Verdict: verdictPreempt, Gangs: []GangFit{{Verdict: verdictPreempt, Victims: []VictimFit{
			{Unit: "gang a/x"}, {Unit: "gang a/y"}, {Unit: "pod a/p"}, {Unit: "pod a/q"}, {Unit: "pod a/r"}}}}}, 12, 24),
			verdictPreempt, "fits after preempting 12 pods (24 GPUs): gang a/x, gang a/y, pod a/p and 2 more"},
		{"no fit", one(WorkloadFit{Verdict: verdictNoFit, Gangs: []GangFit{{Verdict: verdictFits}, {Verdict: verdictNoFit, Reason: "needs 40 GPUs", Preemption: "preemption would not help"}}}, 0, 0),
			verdictNoFit, "does not fit on this cluster: needs 40 GPUs; preemption would not help"},
		{"quota", one(WorkloadFit{Verdict: verdictFits, Queue: &QueueFit{Summary: "ClusterQueue gpus: needs 16, 8 free"}}, 0, 0),
			verdictFits, "Kueue: ClusterQueue gpus: needs 16, 8 free; fits now, on 0 nodes"},
		{"admitted", one(WorkloadFit{Verdict: verdictNoGang, Note: "a lone pod", Queue: &QueueFit{Admitted: true, Summary: "admitted"}}, 0, 0),
			verdictNoGang, "no gang: a lone pod"},
	} {
		v := fitVerdict(tc.r)
		if v.Verdict != tc.verdict || v.Summary != tc.summary {
			t.Errorf("%s: got %q / %q, want %q / %q", tc.name, v.Verdict, v.Summary, tc.verdict, tc.summary)
		}
	}
}

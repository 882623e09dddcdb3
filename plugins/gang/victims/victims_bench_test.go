package victims

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/plugins/gang/plan"
)

// BenchmarkVictimSearch is the per-attempt cost of the whole-gang victim
// search (units built from the snapshot, bisection, reprieve; resources
// only, as the planner checks them without the profile's filters) on 1000
// nodes x 8 GPUs full of low-priority gangs of 8 x 1 GPU. It reports the
// plans computed per attempt and the pods evicted against the fewest that
// would do.
//
//   - packed: each gang on one node; the preemptor is 16 x 1 GPU: the
//     minimum is 2 gangs (16 pods).
//   - spread: gang i has one member on each of nodes i..i+7; the preemptor
//     is 2 x 8 GPUs and needs two whole nodes: two adjacent nodes host 9
//     gangs, the minimum (72 pods).
func BenchmarkVictimSearch(b *testing.B) {
	const nodes, gpus = 1000, 8
	names := make([]string, nodes)
	for i := range names {
		names[i] = fmt.Sprintf("n%04d", i)
	}
	for _, bc := range []struct {
		name       string
		spread     bool
		n          int
		perPod     int64
		minVictims int
	}{
		{name: "packed", n: 16, perPod: 1, minVictims: 16},
		{name: "spread", spread: true, n: 2, perPod: 8, minVictims: 72},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var running []vpod
			for g := range nodes {
				for m := range 8 {
					node := names[g]
					if bc.spread {
						node = names[(g+m)%nodes]
					}
					// Ages differ so the order is not decided by names.
					running = append(running, vpod{name: fmt.Sprintf("g%04d-%d", g, m), node: node, gang: fmt.Sprintf("g%04d", g), gpus: 1, prio: 1, age: time.Duration(g) * time.Second})
				}
			}
			snapshot := victimNodes(gpus, names, running)
			pending := preemptorPods(bc.n, bc.perPod)
			req := plan.Request{Gang: "ns/hi", MinMember: bc.n, Pending: pending}
			in := Input{
				Nodes:     snapshot,
				Priority:  100,
				Own:       func(p *v1.Pod) bool { return p.Labels[api.LabelPodGroup] == "hi" },
				MinMember: func(types.NamespacedName) int { return 8 },
				GPUNames:  gpuNames,
			}
			logger := klog.Background()
			var res *Result
			b.ResetTimer()
			for range b.N {
				units := Build(in)
				var err error
				res, err = Search(context.Background(), units, func(ctx context.Context, removed map[types.UID]bool) (*plan.Plan, error) {
					r := req
					r.Nodes = RemoveFromNodes(logger, snapshot, removed)
					return plan.Compute(ctx, r)
				}, NewShortfall(pending, snapshot))
				if err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			evicted := len(Pods(res.Units))
			b.ReportMetric(float64(res.Plans), "plans/op")
			b.ReportMetric(float64(evicted), "evicted")
			b.ReportMetric(float64(bc.minVictims), "min-evicted")
			if evicted < bc.minVictims {
				b.Fatalf("evicted %d pods, fewer than the minimum %d: the plan must be wrong", evicted, bc.minVictims)
			}
		})
	}
}

// BenchmarkBuildNoVictims is Build on 5000 nodes x 8 GPUs full of gangs of
// the preemptor's own priority: the waiting gangs of scenario 5 at 50 000
// pods, where no pod is a victim.
func BenchmarkBuildNoVictims(b *testing.B) {
	const nodes, gpus = 5000, 8
	names := make([]string, nodes)
	var running []vpod
	for g := range nodes {
		names[g] = fmt.Sprintf("n%04d", g)
		for m := range 8 {
			running = append(running, vpod{name: fmt.Sprintf("g%04d-%d", g, m), node: names[g], gang: fmt.Sprintf("g%04d", g), gpus: 1, prio: 0})
		}
	}
	in := Input{Nodes: victimNodes(gpus, names, running), Priority: 0, GPUNames: gpuNames,
		Own: func(p *v1.Pod) bool { return p.Labels[api.LabelPodGroup] == "hi" }}
	b.ResetTimer()
	for range b.N {
		if units := Build(in); len(units) != 0 {
			b.Fatalf("%d units, want none", len(units))
		}
	}
}

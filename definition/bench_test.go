package definition

import (
	"testing"
)

// BenchmarkGangForPod measures the pod-grouping question (MatchPod +
// GangForPod, as the pod-grouper asks it per pod event) on a replicated-jobs
// workload: with compiled expressions and an object the cache cannot key
// (every call extracts), with the cache hitting (same UID and
// resourceVersion), and parsing and compiling every expression on every
// call, to show what compiling once saves.
func BenchmarkGangForPod(b *testing.B) {
	pod := podT("train-workers-0-1", "jobset.sigs.k8s.io/jobset-name=train", "jobset.sigs.k8s.io/replicatedjob-name=workers", "jobset.sigs.k8s.io/job-index=0")
	pod.Spec.Containers = benchPodContainers()
	// As from an informer: the pod has a UID and resourceVersion.
	pod.UID, pod.ResourceVersion = "pod-uid", "12"
	cached := objT(b, jobsetObj) // has uid and resourceVersion
	uncached := cached.DeepCopy()
	uncached.SetResourceVersion("")
	for _, bc := range []struct {
		name         string
		parsePerCall bool
		obj          any
	}{
		{"compiled", false, uncached},
		{"compiled-cached", false, cached},
		{"parse-per-call", true, uncached},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := compileT(b, jobsetDef)
			c.parsePerCall = bc.parsePerCall
			root := cached
			if bc.obj == uncached {
				root = uncached
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.MatchPod(ctxT, pod); err != nil {
					b.Fatal(err)
				}
				g, err := c.GangForPod(ctxT, root, pod)
				if err != nil || g.MinMember != 3 {
					b.Fatalf("gang %v err %v", g, err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "evals/s")
		})
	}
}

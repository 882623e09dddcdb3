package podtrim

import (
	"fmt"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// BenchmarkPodBytes reports the heap an informer keeps per pod when pods of
// gangs of 8 arrive as protobuf from the API server, with and without the
// transform: the figure behind the scheduler's memory at 50 000 pods.
func BenchmarkPodBytes(b *testing.B) {
	const pods, perGang = 4000, 8
	wire := make([][]byte, pods)
	for i := range wire {
		p := workloadPod(fmt.Sprintf("g%d-%d", i/perGang, i%perGang))
		p.Labels["gang"] = fmt.Sprint("g", i/perGang)
		p.Spec.NodeName = fmt.Sprint("node-", i%997)
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue})
		data, err := p.Marshal()
		if err != nil {
			b.Fatal(err)
		}
		wire[i] = data
	}
	for _, trim := range []bool{false, true} {
		b.Run(fmt.Sprintf("transform=%v", trim), func(b *testing.B) {
			var perPod float64
			for b.Loop() {
				in := NewInterner(DefaultMaxLists)
				kept := make([]*corev1.Pod, pods)
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				for i, data := range wire {
					p := &corev1.Pod{}
					if err := p.Unmarshal(data); err != nil {
						b.Fatal(err)
					}
					if trim {
						if _, err := in.Transform(p); err != nil {
							b.Fatal(err)
						}
					}
					kept[i] = p
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				perPod = float64(after.HeapAlloc-before.HeapAlloc) / pods
				runtime.KeepAlive(kept)
				runtime.KeepAlive(in)
			}
			b.ReportMetric(perPod, "heap-B/pod")
		})
	}
}

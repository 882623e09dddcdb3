package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/muster-io/muster/cli"
	"github.com/muster-io/muster/localcluster"
)

// BenchmarkFit times `muster fit -f` against the in-process API server on
// MUSTER_BENCH_FIT_NODES (1000) nodes × 8 GPUs holding
// MUSTER_BENCH_FIT_PODS (10000) bound pods, 6 of every 10 with one GPU:
// the two list calls, the snapshot, and the plan of a 64-member gang of 2
// GPUs each. Each iteration is one whole command, as a user runs it.
//
//	go test -run '^$' -bench BenchmarkFit -benchtime 5x -ldflags '...' ./test/e2e
func BenchmarkFit(b *testing.B) {
	nodes := envInt("MUSTER_BENCH_FIT_NODES", 1000)
	pods := envInt("MUSTER_BENCH_FIT_PODS", 10000)
	ctx := context.Background()
	ns := testNamespace(b, "bench-fit-")
	b.Cleanup(func() { cleanupRunOrFail(b, ns) })
	if err := createBenchNodes(ctx, ns, nodes, 8, false); err != nil {
		b.Fatal(err)
	}
	if err := createPods(ctx, ns, pods, 16, func(i int) *corev1.Pod {
		req := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
		if i%10 < 6 {
			req[localcluster.DefaultGPUResource] = resource.MustParse("1")
		}
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bound-%d", i), Labels: map[string]string{"bench": "1"}},
			Spec: corev1.PodSpec{NodeName: fmt.Sprintf("%s-%d", ns, i%nodes), RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/none", Resources: corev1.ResourceRequirements{Requests: req, Limits: req}}}},
		}
	}); err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "train.json")
	if err := os.WriteFile(path, fitJob(ns, "train", "muster-"+ns, 64, 2, nil), 0o644); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		out, errOut, code := muster(b, "fit", "-f", path, "-o", "json")
		if code != 0 {
			b.Fatalf("muster fit: exit %d: %s", code, errOut)
		}
		var r cli.FitReport
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			b.Fatal(err)
		}
		if g := r.Clusters[0].Workloads[0].Gangs[0]; !g.Fits || len(g.Assignments) != 64 {
			b.Fatalf("fit: %+v; want the 64-member gang to fit", g)
		}
	}
}

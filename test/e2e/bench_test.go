package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/muster-io/muster/localcluster"
)

// BenchmarkBindPlainPods measures the shared default scheduler binding 1000
// plain pods on 100 fake nodes, from the first create to the last binding
// seen (pod creation runs concurrently and is included). Reports pods/s.
//
//	go test -run '^$' -bench BindPlainPods -ldflags '...' ./test/e2e
func BenchmarkBindPlainPods(b *testing.B) {
	const nodes, pods = 100, 1000
	ctx := context.Background()
	ns := testNamespace(b, "bench-")
	testPool(b, ns, nodes, nil)
	sel, tol := localcluster.PoolPlacement(ns)

	var total, creating time.Duration
	for iter := 0; iter < b.N; iter++ {
		label := fmt.Sprintf("run-%d", iter)
		start := time.Now()
		if err := createPods(ctx, ns, pods, 16, func(i int) *corev1.Pod {
			return &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", label, i), Labels: map[string]string{"run": label}},
				Spec: corev1.PodSpec{NodeSelector: sel, Tolerations: []corev1.Toleration{tol},
					Containers: []corev1.Container{{Name: "main", Image: "busybox", Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}},
			}
		}); err != nil {
			b.Fatal(err)
		}
		creating += time.Since(start)
		if _, err := controlPlane.WaitPodsBound(ctx, ns, "run="+label, pods, localcluster.LongTimeout); err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
		b.StopTimer()
		if err := controlPlane.ForceDeletePods(ctx, ns, "run="+label); err != nil {
			b.Fatal(err)
		}
		if err := controlPlane.WaitPodsGone(ctx, ns, "run="+label, localcluster.LongTimeout); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(pods*b.N)/total.Seconds(), "pods/s")
	b.ReportMetric(creating.Seconds()/float64(b.N), "create-s/op")
}

// createPods creates n pods with `workers` concurrent clients.
func createPods(ctx context.Context, ns string, n, workers int, pod func(i int) *corev1.Pod) error {
	idx := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range idx {
				if _, err := controlPlane.Client.CoreV1().Pods(ns).Create(ctx, pod(i), metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var err error
loop:
	for i := 0; i < n; i++ {
		select {
		case idx <- i:
		case err = <-errs:
			break loop
		}
	}
	close(idx)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	return err
}

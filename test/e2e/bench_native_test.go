package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/muster-io/muster/api"
)

// BenchmarkNativeWebhookLatency measures what native mode adds to a pod
// create: pods are created at MUSTER_BENCH_NW_RATE pods/s (100) for
// MUSTER_BENCH_NW_SECONDS (10) into a namespace opted in to native gangs
// (the API server calls the pod-grouper's webhook, which resolves the gang
// and joins the pod) and, alternating in the same run, into one that is
// not (no webhook call), MUSTER_BENCH_NW_ROUNDS (2) times each. Each pod's
// owner is a Job of 8 pods ganged by annotation that the Job controller
// leaves alone (spec.managedBy), so the pods are exactly the benchmark's;
// their scheduler runs nowhere, so nothing binds and only the create path
// is measured. Reported: p50 and p99 of the create call in both namespaces
// and the differences.
func BenchmarkNativeWebhookLatency(b *testing.B) {
	rate := envInt("MUSTER_BENCH_NW_RATE", 100)
	seconds := envInt("MUSTER_BENCH_NW_SECONDS", 10)
	rounds := envInt("MUSTER_BENCH_NW_ROUNDS", 2)
	joined := testNamespace(b, "bench-nw-on-")
	plain := testNamespace(b, "bench-nw-off-")
	sched := "nowhere-" + joined
	rig := newNativeRig(b, joined, []string{"unused-" + joined}, []string{sched})
	rig.configure(b)
	rig.start(b, true)

	lat := map[string][]time.Duration{}
	for r := range rounds {
		for _, ns := range []string{joined, plain} {
			d, err := createPodsAtRate(b, ns, sched, fmt.Sprintf("r%d", r), rate, seconds)
			if err != nil {
				b.Fatal(err)
			}
			lat[ns] = append(lat[ns], d...)
		}
	}
	// Every pod of the opted-in namespace was joined: what is measured is
	// the webhook doing its work.
	pods, err := controlPlane.Client.CoreV1().Pods(joined).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.SchedulingGroup == nil {
			b.Fatalf("pod %s/%s was not joined to a native PodGroup", joined, p.Name)
		}
	}
	q := func(ns string, p float64) time.Duration {
		d := slices.Clone(lat[ns])
		slices.Sort(d)
		return d[min(len(d)-1, int(p*float64(len(d))))]
	}
	on50, on99, off50, off99 := q(joined, 0.50), q(joined, 0.99), q(plain, 0.50), q(plain, 0.99)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(on50), "webhook-p50-ms")
	b.ReportMetric(ms(on99), "webhook-p99-ms")
	b.ReportMetric(ms(off50), "plain-p50-ms")
	b.ReportMetric(ms(off99), "plain-p99-ms")
	b.ReportMetric(ms(on50-off50), "added-p50-ms")
	b.ReportMetric(ms(on99-off99), "added-p99-ms")
	var sb strings.Builder
	fmt.Fprintf(&sb, "| namespace | pods | create p50 (ms) | create p99 (ms) |\n|---|---|---|---|\n")
	fmt.Fprintf(&sb, "| opted in (webhook) | %d | %.2f | %.2f |\n", len(lat[joined]), ms(on50), ms(on99))
	fmt.Fprintf(&sb, "| not opted in | %d | %.2f | %.2f |\n", len(lat[plain]), ms(off50), ms(off99))
	fmt.Fprintf(&sb, "| added by native mode | | %.2f | %.2f |\n", ms(on50-off50), ms(on99-off99))
	b.Logf("webhook latency at %d pods/s, %d s × %d rounds per namespace:\n%s", rate, seconds, rounds, sb.String())
}

// createPodsAtRate creates rate pods/s for seconds into ns, in gangs of 8
// owned by Jobs the Job controller does not manage, and returns each
// create call's latency. A refused create fails the run: the webhook must
// join every pod.
func createPodsAtRate(b *testing.B, ns, sched, tag string, rate, seconds int) ([]time.Duration, error) {
	ctx := context.Background()
	const gang = 8
	n := rate * seconds
	var out []time.Duration
	interval := time.Second / time.Duration(rate)
	next := time.Now()
	var owner *batchv1.Job
	for i := range n {
		if i%gang == 0 {
			job := &batchv1.Job{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", tag, i/gang), Annotations: map[string]string{api.AnnotationMinMember: fmt.Sprint(gang)}},
				Spec: batchv1.JobSpec{
					// Another controller's: the Job controller creates no
					// pods for it, the benchmark does.
					ManagedBy:   ptr.To("example.com/benchmark"),
					Parallelism: ptr.To[int32](gang), Completions: ptr.To[int32](gang),
					Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
						Containers: []corev1.Container{{Name: "c", Image: "x"}}}},
				},
			}
			var err error
			if owner, err = controlPlane.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
				return nil, err
			}
		}
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
		next = next.Add(interval)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name: fmt.Sprintf("%s-%d", owner.Name, i%gang),
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: owner.Name, UID: owner.UID,
					Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(false)}},
			},
			Spec: corev1.PodSpec{SchedulerName: sched, Containers: []corev1.Container{{Name: "c", Image: "x"}}},
		}
		start := time.Now()
		if _, err := controlPlane.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("creating pod %s/%s: %w", ns, pod.Name, err)
		}
		out = append(out, time.Since(start))
	}
	return out, nil
}

package localcluster_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/muster-io/muster/localcluster"
)

// A pod that asks for GPUs through a ResourceClaimTemplate binds on the
// control plane's own parts: the ResourceClaim controller makes its claim,
// the default scheduler's DynamicResources plugin allocates devices of the
// node's ResourceSlice, and a pod asking for more devices than any node
// publishes stays Pending.
func TestDRAClaimFromTemplateAllocated(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane; not in -short")
	}
	ctx := context.Background() // the components stop with cp.Stop
	cp, err := localcluster.Start(localcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cp.Stop)
	if _, err := cp.StartControllers(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := localcluster.StartScheduler(ctx, cp, localcluster.SchedulerOptions{}); err != nil {
		t.Fatal(err)
	}
	nodes, err := cp.CreateNodes(ctx, 2, localcluster.GPUNodes("dra", 0, localcluster.Topology{}))
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.EnsureGPUDeviceClass(ctx, false); err != nil {
		t.Fatal(err)
	}
	if err := cp.PublishGPUs(ctx, nodes, localcluster.DRAGPUs{PerNode: 4}); err != nil {
		t.Fatal(err)
	}
	ns, err := cp.NewNamespace(ctx, "dra-")
	if err != nil {
		t.Fatal(err)
	}
	for name, count := range map[string]int64{"two": 2, "five": 5} {
		if _, err := cp.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, localcluster.GPUClaimTemplate(name, count), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := cp.Client.CoreV1().Pods(ns).Create(ctx, claimingPod(name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	pods, err := cp.WaitPodsBound(ctx, ns, "app=two", 1, localcluster.ShortTimeout)
	if err != nil {
		t.Fatal(err)
	}
	pod := pods[0]
	if len(pod.Status.ResourceClaimStatuses) != 1 || pod.Status.ResourceClaimStatuses[0].ResourceClaimName == nil {
		t.Fatalf("pod %s claim statuses %+v, want the claim made from its template", pod.Name, pod.Status.ResourceClaimStatuses)
	}
	claim, err := cp.Client.ResourceV1().ResourceClaims(ns).Get(ctx, *pod.Status.ResourceClaimStatuses[0].ResourceClaimName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if claim.Status.Allocation == nil || len(claim.Status.Allocation.Devices.Results) != 2 {
		t.Fatalf("claim %s allocation %+v, want 2 devices", claim.Name, claim.Status.Allocation)
	}
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != localcluster.DRAGPUDriver || r.Pool != pod.Spec.NodeName {
			t.Errorf("claim %s device %s/%s/%s, want one of node %s's", claim.Name, r.Driver, r.Pool, r.Device, pod.Spec.NodeName)
		}
	}

	// Five devices on nodes of four: never bound, for as long as the
	// scheduler retries it.
	err = localcluster.Consistently(ctx, localcluster.ShortTimeout/6, "the pod asking for 5 devices stays unbound", func(ctx context.Context) (bool, string, error) {
		p, err := cp.Client.CoreV1().Pods(ns).Get(ctx, "five", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return p.Spec.NodeName == "", "bound to " + p.Spec.NodeName, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// claimingPod is a pod whose one container uses the claim made from the
// template of its own name.
func claimingPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptr.To(name)}},
			Containers: []corev1.Container{{
				Name: "main", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpus"}}},
			}},
		},
	}
}

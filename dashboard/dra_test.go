package dashboard

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// TestBuildDRA: GPUs published as DRA devices are cells of their node; a
// pod holds the GPU devices allocated to the claims reserved for it, a
// pending pod asks for what its claims request; devices of other drivers
// are no GPUs; a GPU asked for as an extended resource that DRA backs
// counts once.
func TestBuildDRA(t *testing.T) {
	devices := func(n int) []resourcev1.Device {
		out := make([]resourcev1.Device, n)
		for i := range out {
			out[i].Name = "dev-" + string(rune('a'+i))
		}
		return out
	}
	slice := func(node, driver string, n int) *resourcev1.ResourceSlice {
		return &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-" + driver},
			Spec: resourcev1.ResourceSliceSpec{Driver: driver, NodeName: ptr.To(node), Devices: devices(n)}}
	}
	allocated := func(name string, pod types.UID, drivers ...string) *resourcev1.ResourceClaim {
		c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name}}
		c.Status.Allocation = &resourcev1.AllocationResult{}
		for i, d := range drivers {
			c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results,
				resourcev1.DeviceRequestAllocationResult{Request: "gpus", Driver: d, Pool: "d1", Device: "dev-" + string(rune('a'+i))})
		}
		c.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: string(pod), UID: pod}}
		return c
	}
	asking := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "b-gpus"},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{
			{Name: "gpus", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 2}},
			{Name: "nic", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "nic.example.com", Count: 1}},
		}}}}
	withClaims := func(uid types.UID, claims ...string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.UID = uid
			for _, c := range claims {
				p.Status.ResourceClaimStatuses = append(p.Status.ResourceClaimStatuses, corev1.PodResourceClaimStatus{Name: "gpus", ResourceClaimName: ptr.To(c)})
			}
		}
	}
	in := Inputs{
		GPUResources:   []corev1.ResourceName{"nvidia.com/gpu", "gpu.nvidia.com"},
		Now:            now,
		Nodes:          []*corev1.Node{node("d1", "a", 0), node("cpu", "a", 0)},
		ResourceSlices: []*resourcev1.ResourceSlice{slice("d1", "gpu.nvidia.com", 4), slice("d1", "nic.example.com", 2), slice("cpu", "nic.example.com", 2)},
		ResourceClaims: []*resourcev1.ResourceClaim{
			allocated("a-gpus", "uid-a", "gpu.nvidia.com", "gpu.nvidia.com", "nic.example.com"),
			allocated("c-extended", "uid-c", "gpu.nvidia.com"),
			asking,
		},
		PodGroups: []*schedv1alpha1.PodGroup{podGroup("train", "JobSet", "train", 2, now)},
		Pods: []*corev1.Pod{
			pod("a", "train", "d1", 0, withClaims("uid-a", "a-gpus")),
			pod("b", "train", "", 0, withClaims("uid-b", "b-gpus")),
			pod("c", "", "d1", 1, withClaims("uid-c", "c-extended")),
		},
	}
	s := Build(in)
	if len(s.Nodes) != 1 || s.Nodes[0].Name != "d1" {
		t.Fatalf("nodes %+v, want d1 alone (the other has no GPU devices)", s.Nodes)
	}
	row := ""
	for _, c := range s.Nodes[0].Cells {
		if c < 0 {
			row += "."
		} else {
			row += s.Pods[c].Name
		}
	}
	if row != "aac." {
		t.Errorf("d1 cells %q, want a's 2 devices, c's 1 and one free", row)
	}
	if want := (Totals{Capacity: 4, Allocated: 3, Free: 1, IdlePartial: 1, Waiting: 2}); s.Totals != want {
		t.Errorf("totals %+v, want %+v", s.Totals, want)
	}
	if w := s.Workloads[0]; w.GPUs != 2 || w.Scheduled != 1 || w.Pods != 2 {
		t.Errorf("train %+v, want 2 GPUs of 1 scheduled member, 2 members", w)
	}
}

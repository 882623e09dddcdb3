package dashboard

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
)

// GPUs handed out through Dynamic Resource Allocation: a node's GPUs are
// the devices its ResourceSlices publish for a driver named like a GPU
// resource (gpu.nvidia.com, gpu.amd.com: the drivers name their
// DeviceClasses after themselves), and a pod holds the devices of those
// drivers allocated to the claims reserved for it. A pending pod asks for
// what its claims' requests of such a DeviceClass count. Devices of other
// drivers (NICs, channels) are not GPUs and are not drawn.

// draView is the DRA side of a snapshot.
type draView struct {
	capacity  map[string]int64    // node → GPU devices published
	held      map[types.UID]int64 // pod → GPU devices allocated to it
	requested map[string]int64    // namespace/claim → GPU devices asked, unallocated
}

func newDRAView(in Inputs) draView {
	v := draView{capacity: map[string]int64{}, held: map[types.UID]int64{}, requested: map[string]int64{}}
	gpu := func(name string) bool { return slices.Contains(in.GPUResources, corev1.ResourceName(name)) }
	for _, s := range in.ResourceSlices {
		if s.Spec.NodeName == nil || *s.Spec.NodeName == "" || !gpu(s.Spec.Driver) {
			continue
		}
		v.capacity[*s.Spec.NodeName] += int64(len(s.Spec.Devices))
	}
	for _, c := range in.ResourceClaims {
		if a := c.Status.Allocation; a != nil {
			var n int64
			for _, r := range a.Devices.Results {
				if gpu(r.Driver) {
					n++
				}
			}
			for _, ref := range c.Status.ReservedFor {
				if ref.Resource == "pods" && ref.APIGroup == "" {
					v.held[ref.UID] += n
				}
			}
			continue
		}
		var n int64
		for _, r := range c.Spec.Devices.Requests {
			switch {
			case r.Exactly != nil:
				if gpu(r.Exactly.DeviceClassName) && r.Exactly.AllocationMode != resourcev1.DeviceAllocationModeAll {
					n += max(r.Exactly.Count, 1)
				}
			case len(r.FirstAvailable) > 0:
				// The first choice is what the claim asks for first.
				if f := r.FirstAvailable[0]; gpu(f.DeviceClassName) && f.AllocationMode != resourcev1.DeviceAllocationModeAll {
					n += max(f.Count, 1)
				}
			}
		}
		if n > 0 {
			v.requested[c.Namespace+"/"+c.Name] = n
		}
	}
	return v
}

// podGPUs is the GPU devices p holds, or, before they are allocated, the
// ones its claims ask for.
func (v draView) podGPUs(p *corev1.Pod) int64 {
	if n := v.held[p.UID]; n > 0 {
		return n
	}
	var n int64
	for _, s := range p.Status.ResourceClaimStatuses {
		if s.ResourceClaimName != nil {
			n += v.requested[p.Namespace+"/"+*s.ResourceClaimName]
		}
	}
	return n
}

package definition

import (
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
)

// ClaimTemplates looks up a ResourceClaimTemplate of the pods' namespace
// by name; nil when it is not known.
type ClaimTemplates func(name string) *resourcev1.ResourceClaimTemplate

// ClaimGPUs is how many GPUs the ResourceClaimTemplates of spec ask for:
// the devices of each request whose DeviceClass is named in gpuNames (a
// DRA GPU class, such as gpu.nvidia.com, is counted as a GPU resource is).
// A request for all devices of a node has no count to add; a request with
// alternatives counts its first. Claims the pods share by name are not
// the pod's own and are left out.
func ClaimGPUs(spec *corev1.PodSpec, templates ClaimTemplates, gpuNames []corev1.ResourceName) int64 {
	if spec == nil || templates == nil {
		return 0
	}
	gpu := func(class string) bool {
		for _, n := range gpuNames {
			if string(n) == class {
				return true
			}
		}
		return false
	}
	var n int64
	for _, pc := range spec.ResourceClaims {
		if pc.ResourceClaimTemplateName == nil {
			continue
		}
		t := templates(*pc.ResourceClaimTemplateName)
		if t == nil {
			continue
		}
		for _, r := range t.Spec.Spec.Devices.Requests {
			switch {
			case r.Exactly != nil:
				if gpu(r.Exactly.DeviceClassName) && r.Exactly.AllocationMode != resourcev1.DeviceAllocationModeAll {
					n += max(r.Exactly.Count, 1)
				}
			case len(r.FirstAvailable) > 0:
				s := r.FirstAvailable[0]
				if gpu(s.DeviceClassName) && s.AllocationMode != resourcev1.DeviceAllocationModeAll {
					n += max(s.Count, 1)
				}
			}
		}
	}
	return n
}

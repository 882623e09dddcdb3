package definition

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestClaimGPUs(t *testing.T) {
	exact := func(class string, mode resourcev1.DeviceAllocationMode, n int64) resourcev1.DeviceRequest {
		return resourcev1.DeviceRequest{Name: "r", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class, AllocationMode: mode, Count: n}}
	}
	tpl := func(name string, reqs ...resourcev1.DeviceRequest) *resourcev1.ResourceClaimTemplate {
		return &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: reqs}}}}
	}
	byName := map[string]*resourcev1.ResourceClaimTemplate{
		"four":  tpl("four", exact("gpu.nvidia.com", resourcev1.DeviceAllocationModeExactCount, 4)),
		"nic":   tpl("nic", exact("nic.example.com", resourcev1.DeviceAllocationModeExactCount, 2)),
		"all":   tpl("all", exact("gpu.nvidia.com", resourcev1.DeviceAllocationModeAll, 0)),
		"mixed": tpl("mixed", exact("gpu.nvidia.com", "", 0), exact("nic.example.com", "", 1)),
		"alt": tpl("alt", resourcev1.DeviceRequest{Name: "r", FirstAvailable: []resourcev1.DeviceSubRequest{
			{Name: "big", DeviceClassName: "gpu.nvidia.com", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 2},
			{Name: "small", DeviceClassName: "gpu.nvidia.com", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1},
		}}),
	}
	lookup := func(name string) *resourcev1.ResourceClaimTemplate { return byName[name] }
	spec := func(templates ...string) *corev1.PodSpec {
		s := &corev1.PodSpec{}
		for _, n := range templates {
			s.ResourceClaims = append(s.ResourceClaims, corev1.PodResourceClaim{Name: n, ResourceClaimTemplateName: &n})
		}
		return s
	}
	shared := "shared"
	cases := []struct {
		name string
		spec *corev1.PodSpec
		want int64
	}{
		{"exact count of a GPU class", spec("four"), 4},
		{"another class is no GPU", spec("nic"), 0},
		{"all devices has no count", spec("all"), 0},
		{"count defaults to one", spec("mixed"), 1},
		{"first alternative", spec("alt"), 2},
		{"several claims add up", spec("four", "alt", "nic"), 6},
		{"unknown template", spec("missing"), 0},
		{"a claim shared by name", &corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{{Name: "s", ResourceClaimName: &shared}}}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ClaimGPUs(tc.spec, lookup, DefaultGPUResourceNames); got != tc.want {
				t.Errorf("ClaimGPUs = %d, want %d", got, tc.want)
			}
		})
	}
	if got := ClaimGPUs(spec("four"), nil, DefaultGPUResourceNames); got != 0 {
		t.Errorf("without templates: %d, want 0", got)
	}
}

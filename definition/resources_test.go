package definition

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestPodRequests(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	ctr := func(name string, req, lim corev1.ResourceList) corev1.Container {
		return corev1.Container{Name: name, Resources: corev1.ResourceRequirements{Requests: req, Limits: lim}}
	}
	tests := []struct {
		name string
		spec corev1.PodSpec
		want map[string]int64 // milli
	}{
		{"limits stand in for requests", corev1.PodSpec{Containers: []corev1.Container{
			ctr("a", rl("cpu", "1"), rl("cpu", "2", "nvidia.com/gpu", "4")),
			ctr("b", nil, rl("memory", "1Gi")),
		}}, map[string]int64{"cpu": 1000, "nvidia.com/gpu": 4000, "memory": 1 << 30 * 1000}},
		{"largest init container wins", corev1.PodSpec{
			InitContainers: []corev1.Container{ctr("i", rl("cpu", "4"), nil)},
			Containers:     []corev1.Container{ctr("a", rl("cpu", "1"), nil)},
		}, map[string]int64{"cpu": 4000}},
		{"sidecars add up", corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "s", RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: rl("cpu", "500m")}}},
			Containers:     []corev1.Container{ctr("a", rl("cpu", "1"), nil)},
		}, map[string]int64{"cpu": 1500}},
		{"overhead", corev1.PodSpec{
			Overhead:   rl("cpu", "100m"),
			Containers: []corev1.Container{ctr("a", rl("cpu", "1"), nil)},
		}, map[string]int64{"cpu": 1100}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec := tc.spec.DeepCopy()
			got := PodRequests(&tc.spec)
			if diff := cmp.Diff(tc.want, milli(got)); diff != "" {
				t.Errorf("requests (-want, +got):\n%s", diff)
			}
			if diff := cmp.Diff(spec, &tc.spec); diff != "" {
				t.Errorf("spec changed:\n%s", diff)
			}
		})
	}
}

func TestGPUs(t *testing.T) {
	l := rl("nvidia.com/gpu", "4", "amd.com/gpu", "2", "cpu", "8")
	if got := GPUs(l, DefaultGPUResourceNames); got != 6 {
		t.Errorf("GPUs = %d, want 6", got)
	}
	if got := GPUs(l, []corev1.ResourceName{"amd.com/gpu"}); got != 2 {
		t.Errorf("GPUs(amd) = %d, want 2", got)
	}
}

func TestScaleQuantity(t *testing.T) {
	for _, tc := range []struct {
		q         string
		num, den  int64
		whole     bool
		wantMilli int64
	}{
		{"4", 1, 3, true, 2000},
		{"4", 1, 3, false, 1334},
		{"2Gi", 1, 3, true, 715827883000},
		{"1Ei", 3, 1, true, 3 << 60 * 1},
	} {
		got := scaleQuantity(resource.MustParse(tc.q), tc.num, tc.den, tc.whole)
		want := tc.wantMilli
		if tc.q == "1Ei" {
			if got.Value() != 3<<60 {
				t.Errorf("%s×%d/%d = %s", tc.q, tc.num, tc.den, got.String())
			}
			continue
		}
		if got.MilliValue() != want {
			t.Errorf("%s×%d/%d = %d milli, want %d", tc.q, tc.num, tc.den, got.MilliValue(), want)
		}
	}
}

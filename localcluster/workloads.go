package localcluster

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RootJob is a Job without owner of n parallel pods that run to
// completion (the pause image; the pod simulator or the test finishes
// them), each asking for 100m CPU and gpus GPUs, with the Job controller's
// scheduling as given (nil: none).
func RootJob(name string, n int32, gpus int64, scheduling *batchv1.JobSchedulingConfiguration) *batchv1.Job {
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
	if gpus > 0 {
		res[DefaultGPUResource] = *resource.NewQuantity(gpus, resource.DecimalSI)
	}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: batchv1.JobSpec{
			Parallelism: &n,
			Completions: &n,
			Scheduling:  scheduling,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{
					Name: "main", Image: "registry.k8s.io/pause:3.10",
					Resources: corev1.ResourceRequirements{Requests: res, Limits: res},
				}},
			}},
		},
	}
}

package sandbox

import (
	"context"
	"io"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/muster-io/muster/test/harness"
)

// Components is what the sandbox runs on top of the control plane. This is
// the one place where muster's parts plug in.
type Components struct {
	// CRDs are installed before the controllers start (PodGroup, Karta, the
	// CRDs of example workloads).
	CRDs []*apiextensionsv1.CustomResourceDefinition
	// Start runs in order after the nodes exist: the scheduler serving
	// SchedulerName, the pod-grouper, operators. Each registers its own stop
	// with the control plane (harness.StartScheduler does).
	Start []Component
	// Examples are applied in order unless --no-examples.
	Examples []Example
}

// Component is one long-running part.
type Component struct {
	Name  string
	Start func(ctx context.Context, cp *harness.ControlPlane) (stop func(), err error)
}

// Example is a workload applied to show muster at work.
type Example struct {
	Name        string
	Description string
	// Namespace, default "examples".
	Namespace string
	YAML      []byte
	// PodSelector and Pods: the sandbox waits until Pods pods matching
	// PodSelector are bound.
	PodSelector string
	Pods        int
	// GPUs the example needs in total; it is skipped on a smaller sandbox.
	GPUs int
	// Describe prints the result; nil prints pods → nodes (DescribePods).
	// Replace with `muster describe` output once the CLI exists.
	Describe func(ctx context.Context, cp *harness.ControlPlane, ns string, ex Example, w io.Writer) error
}

// components returns the muster parts of the sandbox.
//
// TODO(lead): replace the placeholder scheduler with muster-scheduler (the
// kube-scheduler app with the gang plugin, via harness.StartSchedulerApp and
// the shipped scheduler configuration), add the pod-grouper, the PodGroup
// CRD, and the JobSet gang example (one leader Job + two worker Jobs, 4 GPUs
// per pod) with `muster describe` as its Describe.
func components() Components {
	return Components{
		Start: []Component{{
			// Placeholder: the default profile under muster's scheduler name,
			// so the examples schedule before the gang plugin lands.
			Name: SchedulerName + " (placeholder)",
			Start: func(ctx context.Context, cp *harness.ControlPlane) (func(), error) {
				return harness.StartScheduler(ctx, cp, harness.SchedulerOptions{Config: harness.DefaultProfile(SchedulerName)})
			},
		}},
		Examples: []Example{gpuDeployment},
	}
}

// gpuDeployment is a plain Deployment of two 1-GPU pods for muster-scheduler.
var gpuDeployment = Example{
	Name:        "gpu-deployment",
	Description: "a Deployment of 2 replicas × 1 GPU, scheduled by " + SchedulerName,
	PodSelector: "app=gpu-deployment",
	Pods:        2,
	GPUs:        2,
	YAML: []byte(`
apiVersion: apps/v1
kind: Deployment
metadata:
  name: gpu-deployment
spec:
  replicas: 2
  selector:
    matchLabels: {app: gpu-deployment}
  template:
    metadata:
      labels: {app: gpu-deployment}
    spec:
      schedulerName: ` + SchedulerName + `
      containers:
      - name: cuda
        image: nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04
        resources:
          limits: {nvidia.com/gpu: 1}
`),
}

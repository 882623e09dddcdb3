package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/cli"
	sandboxapp "github.com/muster-io/muster/cmd/muster-sandbox/app"
	"github.com/muster-io/muster/localcluster"
)

// draJob is a Job of 4 pods ganged by annotation, each claiming 4 GPUs
// through the template four.
func draJob(name string) *batchv1.Job {
	pod := corev1.PodSpec{
		SchedulerName:  "muster-scheduler",
		RestartPolicy:  corev1.RestartPolicyNever,
		ResourceClaims: []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptrTo("four")}},
		Containers: []corev1.Container{{
			Name: "main", Image: "registry.k8s.io/pause:3.10",
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
				Claims:   []corev1.ResourceClaim{{Name: "gpus"}},
			},
		}},
	}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{api.AnnotationMinMember: "4"}},
		Spec: batchv1.JobSpec{
			Parallelism: ptrTo(int32(4)), Completions: ptrTo(int32(4)),
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}}, Spec: pod},
		},
	}
}

// draNamespace creates the namespace ns with the ResourceClaimTemplate
// four (4 GPUs) that draJob's pods claim through.
func draNamespace(t *testing.T, sb *runningSandbox, ns string) {
	t.Helper()
	ctx := context.Background()
	if _, err := sb.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.kube.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, localcluster.GPUClaimTemplate("four", 4), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestSandboxDRA: on `muster-sandbox --dra` the GPUs exist only as DRA
// devices; a Job of 4 pods each claiming 4 GPUs binds whole on the 4
// nodes with all 16 devices allocated, `muster describe` counts 16 GPUs,
// and a second such Job binds nothing and says which devices it lacks.
func TestSandboxDRA(t *testing.T) {
	sb := startSandbox(t, sandboxapp.Config{Nodes: 4, GPUsPerNode: 4, Zones: 1, DRA: true, NoExamples: true})
	ctx := context.Background()
	nodes, err := sb.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		if q, ok := n.Status.Capacity[localcluster.DefaultGPUResource]; ok {
			t.Errorf("node %s has %s %s with --dra, want none", n.Name, q.String(), localcluster.DefaultGPUResource)
		}
	}
	slices, err := sb.kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(slices.Items) != 4 {
		t.Fatalf("%d ResourceSlices, want one per node", len(slices.Items))
	}
	for _, s := range slices.Items {
		d := s.Spec.Devices
		var mem resource.Quantity
		if len(d) > 0 {
			mem = d[0].Capacity[localcluster.DRACapMemory].Value
		}
		if s.Spec.Driver != localcluster.DRAGPUDriver || len(d) != 4 || d[0].Attributes[localcluster.DRAAttrProduct].StringValue == nil ||
			d[0].Attributes[localcluster.DRAAttrClique].StringValue == nil || mem.String() != "80Gi" {
			t.Errorf("slice %s: driver %s, devices %+v; want 4 GPUs with product, clique and memory", s.Name, s.Spec.Driver, d)
		}
	}

	ns := "dra"
	sbMuster := func(args ...string) (string, string, int) { return sb.muster(t, args...) }
	draNamespace(t, sb, ns)
	if _, err := sb.kube.BatchV1().Jobs(ns).Create(ctx, draJob("first"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, localcluster.ShortTimeout, "Job first bound whole", func(ctx context.Context) (bool, string, error) {
		pods := sb.pods(t, ns, "app=first")
		bound := 0
		for _, p := range pods {
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		return bound == 4, fmt.Sprintf("%d of %d pods bound", bound, len(pods)), nil
	})
	onNode := map[string]bool{}
	for _, p := range sb.pods(t, ns, "app=first") {
		onNode[p.Spec.NodeName] = true
	}
	claims, err := sb.kube.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	devices := map[string]bool{}
	for _, c := range claims.Items {
		if c.Status.Allocation != nil {
			for _, r := range c.Status.Allocation.Devices.Results {
				devices[r.Pool+"/"+r.Device] = true
			}
		}
	}
	if len(onNode) != 4 || len(devices) != 16 {
		t.Errorf("Job first on %d nodes with %d devices allocated, want 4 and 16", len(onNode), len(devices))
	}
	out, errOut, code := sbMuster("describe", "job/first", "-n", ns, "-o", "json")
	if code != 0 {
		t.Fatalf("muster describe: exit %d: %s", code, errOut)
	}
	var d cli.Description
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatal(err)
	}
	if d.Totals.GPUs != 16 {
		t.Errorf("describe counts %d GPUs, want 16", d.Totals.GPUs)
	}

	if _, err := sb.kube.BatchV1().Jobs(ns).Create(ctx, draJob("second"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, localcluster.ShortTimeout, "describe job/second says which devices it lacks", func(context.Context) (bool, string, error) {
		out, errOut, _ := sbMuster("describe", "job/second", "-n", ns)
		return strings.Contains(out, "devices of class gpu.nvidia.com"), out + errOut, nil
	})
	for _, p := range sb.pods(t, ns, "app=second") {
		if p.Spec.NodeName != "" {
			t.Errorf("pod %s of the Job that cannot fit is bound to %s", p.Name, p.Spec.NodeName)
		}
	}
}

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var pytorchJobsGVR = schema.GroupVersionResource{Group: "kubeflow.org", Version: "v1", Resource: "pytorchjobs"}

// kueuePyTorchJobYAML is a PyTorchJob of one master and workers workers,
// gpus GPUs each, submitted to the LocalQueue "default".
func kueuePyTorchJobYAML(name, pool, sched string, workers, gpus int) string {
	replica := func(typ string, n int) string {
		return fmt.Sprintf(`    %s:
      replicas: %d
      restartPolicy: Never
      template:
        spec:
          %s
          containers:
          - name: pytorch
            image: busybox
            resources: {requests: {cpu: 100m}, limits: {nvidia.com/gpu: %d}}
`, typ, n, podPlacement(pool, sched, "          "), gpus)
	}
	return fmt.Sprintf(`
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: %s
  labels: {kueue.x-k8s.io/queue-name: default}
spec:
  runPolicy: {cleanPodPolicy: None}
  pytorchReplicaSpecs:
%s%s`, name, replica("Master", 1), replica("Worker", workers))
}

// TestKueuePyTorchJob: a PyTorchJob, run by the real Kubeflow training
// operator, through Kueue and then muster. Kueue suspends it until the
// ClusterQueue has its quota; the training operator then creates its
// master and workers; the pod-grouper gangs them by the catalog's
// PyTorchJob definition (one gang of master + workers) and muster binds it
// whole. A second job that the remaining quota cannot hold stays suspended
// with no pods, and muster describe says it waits for quota.
func TestKueuePyTorchJob(t *testing.T) {
	startKueue(t, "", "trainingoperator")
	ns, sched := gangTest(t, "kueue-pytorch-", 4, 4, nil)
	startPodGrouper(t, sched)
	kueueQueues(t, ns, 12, false)

	applyYAML(t, ns, kueuePyTorchJobYAML("ddp", ns, sched, 2, 4))
	waitWorkloadCondition(t, ns, "PyTorchJob", "ddp", "Admitted", "True")
	pods := waitRunning(t, ns, "training.kubeflow.org/job-name=ddp", 3)
	gangs := map[string]int{}
	for _, p := range pods {
		gangs[p.Labels["scheduling.x-k8s.io/pod-group"]]++
	}
	if len(gangs) != 1 || gangs[""] != 0 {
		t.Errorf("the PyTorchJob's pods are in gangs %v, want one gang of all 3", gangs)
	}
	d := describeJSON(t, ns, "pytorchjob/ddp")
	if len(d.Gangs) != 1 || d.Gangs[0].MinMember != 3 || d.Gangs[0].Bound != 3 {
		t.Errorf("describe pytorchjob/ddp: gangs %+v, want one of min-member 3, 3 bound", d.Gangs)
	}
	if d.Queue == nil || d.Queue.State != "Admitted" {
		t.Errorf("describe pytorchjob/ddp: queue %+v, want Admitted", d.Queue)
	}

	// 12 GPUs held of 12: the next job waits for quota, suspended, no pods.
	applyYAML(t, ns, kueuePyTorchJobYAML("late", ns, sched, 1, 4))
	waitWorkloadCondition(t, ns, "PyTorchJob", "late", "QuotaReserved", "False")
	holdsFor(t, 2*time.Second, "PyTorchJob late suspended with no pods", func(ctx context.Context) (bool, string, error) {
		job, err := controlPlane.Dynamic.Resource(pytorchJobsGVR).Namespace(ns).Get(ctx, "late", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		suspended, _, err := unstructured.NestedBool(job.Object, "spec", "runPolicy", "suspend")
		if err != nil {
			return false, "", err
		}
		l, err := controlPlane.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "training.kubeflow.org/job-name=late"})
		if err != nil {
			return false, "", err
		}
		return suspended && len(l.Items) == 0, fmt.Sprintf("suspend=%v, %d pods", suspended, len(l.Items)), nil
	})
	if d := describeJSON(t, ns, "pytorchjob/late"); d.Queue == nil || !strings.Contains(d.Queue.Summary, "needs 8 nvidia.com/gpu, 0 free") {
		t.Errorf("describe pytorchjob/late: queue %+v, want it waiting for 8 GPUs with 0 free", d.Queue)
	}
}

package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/muster-io/muster/localcluster"
	"github.com/muster-io/muster/localcluster/operators"
)

// The real JobSet and LeaderWorkerSet operators run as child processes
// (localcluster/operators/<name>); their CRDs come from the same module versions.

var operatorCRDErr = map[string]error{}

func init() {
	registerSetup("operator CRDs", func(ctx context.Context, cp *localcluster.ControlPlane) error {
		// A missing CRD fails the operator's tests, not the whole binary.
		for _, name := range operators.Names() {
			operatorCRDErr[name] = cp.InstallOperatorCRDs(ctx, name)
		}
		return nil
	})
}

var operatorMu sync.Mutex

// startOperator runs the named operator for the test and stops it (and
// removes its webhooks) when the test ends. Operators run one at a time.
func startOperator(t *testing.T, name string) *localcluster.Operator {
	t.Helper()
	return startOperators(t, operatorRun{name: name})[0]
}

// operatorRun is one operator startOperators runs, with its options.
type operatorRun struct {
	name string
	opts localcluster.OperatorOptions
}

// startOperators runs several operators together for one test (a queue
// in front of a workload's operator), under the one lock.
func startOperators(t *testing.T, runs ...operatorRun) []*localcluster.Operator {
	t.Helper()
	for _, r := range runs {
		if err := operatorCRDErr[r.name]; err != nil {
			t.Fatalf("CRDs of %s: %v", r.name, err)
		}
	}
	operatorMu.Lock()
	t.Cleanup(operatorMu.Unlock)
	var ops []*localcluster.Operator
	for _, r := range runs {
		op, err := localcluster.StartOperatorWith(t.Context(), controlPlane, r.name, r.opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("%s log (last 30 lines):\n%s", r.name, op.LogTail(30))
			}
			op.Stop()
		})
		ops = append(ops, op)
	}
	return ops
}

func TestOperatorJobSetLeaderAndWorkers(t *testing.T) {
	startOperator(t, "jobset")
	ctx := t.Context()
	ns := testNamespace(t, "jobset-")
	gpuPool(t, ns, 2, 8)
	applyYAML(t, ns, jobSetYAML("train", ns, ""))
	sel := "jobset.sigs.k8s.io/jobset-name=train"
	pods := waitRunning(t, ns, sel, 3)
	jobs, err := controlPlane.Client.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, j := range jobs.Items {
		names = append(names, j.Name)
		if len(j.OwnerReferences) != 1 || j.OwnerReferences[0].Kind != "JobSet" {
			t.Errorf("Job %s owners %v, want the JobSet", j.Name, j.OwnerReferences)
		}
	}
	sort.Strings(names)
	if got, want := strings.Join(names, ","), "train-leader-0,train-workers-0,train-workers-1"; got != want {
		t.Errorf("Jobs = %s, want %s", got, want)
	}
	for _, p := range pods {
		// The operator's pod webhook labels its pods; only the real operator does that.
		if p.Annotations["jobset.sigs.k8s.io/replicatedjob-name"] == "" && p.Labels["jobset.sigs.k8s.io/replicatedjob-name"] == "" {
			t.Errorf("pod %s lacks the replicatedjob-name label/annotation of JobSet: %v", p.Name, p.Labels)
		}
	}

	if err := controlPlane.Dynamic.Resource(jobsetsGVR).Namespace(ns).Delete(ctx, "train", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, ns, sel)
}

func TestOperatorLeaderWorkerSet(t *testing.T) {
	startOperator(t, "lws")
	ctx := t.Context()
	ns := testNamespace(t, "lws-")
	gpuPool(t, ns, 2, 8)
	applyYAML(t, ns, lwsYAML(ns, "", 2))
	sel := "leaderworkerset.sigs.k8s.io/name=serve"
	waitRunning(t, ns, sel, 4)
	sts, err := controlPlane.Client.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owners := map[string]string{}
	for _, s := range sts.Items {
		if len(s.OwnerReferences) == 1 {
			owners[s.Name] = s.OwnerReferences[0].Kind + "/" + s.OwnerReferences[0].Name
		}
	}
	want := map[string]string{"serve": "LeaderWorkerSet/serve", "serve-0": "Pod/serve-0", "serve-1": "Pod/serve-1"}
	if fmt.Sprint(owners) != fmt.Sprint(want) {
		t.Errorf("StatefulSets and owners = %v, want %v (leader StatefulSet, one worker StatefulSet per leader pod)", owners, want)
	}
	waitFor(t, localcluster.ShortTimeout, "LeaderWorkerSet serve readyReplicas 2", objectIs(dynamicGetter(controlPlane.Dynamic.Resource(lwsGVR).Namespace(ns)), "serve", func(lws *unstructured.Unstructured) (bool, string) {
		// A missing or mistyped field reads as 0: not ready yet.
		ready, _, _ := unstructured.NestedInt64(lws.Object, "status", "readyReplicas")
		return ready == 2, fmt.Sprintf("readyReplicas=%d", ready)
	}))
	if err := controlPlane.Dynamic.Resource(lwsGVR).Namespace(ns).Delete(ctx, "serve", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, ns, sel)
}

var (
	jobsetsGVR = schema.GroupVersionResource{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"}
	lwsGVR     = schema.GroupVersionResource{Group: "leaderworkerset.x-k8s.io", Version: "v1", Resource: "leaderworkersets"}
)

// jobSetYAML is a JobSet of one leader Job and two worker Jobs of one pod
// with 4 GPUs each, placed on pool; sched, if set, is the pods' scheduler.
func jobSetYAML(name, pool, sched string) string {
	podSpec := podPlacement(pool, sched, "            ")
	job := func(rj string, replicas int) string {
		return fmt.Sprintf(`
  - name: %s
    replicas: %d
    template:
      spec:
        parallelism: 1
        completions: 1
        template:
          spec:
            %s
            containers:
            - name: main
              image: busybox
              resources: {limits: {nvidia.com/gpu: 4}}`, rj, replicas, podSpec)
	}
	return `
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: ` + name + `}
spec:
  replicatedJobs:` + job("leader", 1) + job("workers", 2) + "\n"
}

// lwsYAML is the LeaderWorkerSet serve of 2 groups of 2 pods with gpus
// GPUs each, placed on pool; sched, if set, is the pods' scheduler.
func lwsYAML(pool, sched string, gpus int) string {
	return fmt.Sprintf(`
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {name: serve}
spec:
  replicas: 2
  leaderWorkerTemplate:
    size: 2
    workerTemplate:
      spec:
        %s
        containers:
        - name: main
          image: vllm
          resources: {limits: {nvidia.com/gpu: %d}}
`, podPlacement(pool, sched, "        "), gpus)
}

// podPlacement is placement, after the scheduler name if sched is set.
func podPlacement(pool, sched, indent string) string {
	if sched == "" {
		return placement(pool, indent)
	}
	return "schedulerName: " + sched + "\n" + indent + placement(pool, indent)
}

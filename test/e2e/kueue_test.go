package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/muster-io/muster/catalog"
	"github.com/muster-io/muster/cli"
	"github.com/muster-io/muster/definition"
	"github.com/muster-io/muster/localcluster"
	"github.com/muster-io/muster/localcluster/operators"
)

// Kueue in front of muster: the real Kueue (operator "kueue") admits
// workloads by quota, muster-scheduler places each admitted gang whole.

var kueueWorkloadsGVR = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "workloads"}

// startKueue runs Kueue on the configuration muster ships for it
// (manifests/kueue/kueue-config-fragment.yaml) with the keys of extra
// (YAML, e.g. a waitForPodsReady of seconds) over it, together with the
// operators the test's workloads need.
func startKueue(t *testing.T, extra string, operators ...string) {
	t.Helper()
	ensureNamespace(t, "kueue-system")
	cfg := shippedKueueConfig(t)
	cfg["namespace"] = "kueue-system"
	var over map[string]any
	if err := yaml.Unmarshal([]byte(extra), &over); err != nil {
		t.Fatal(err)
	}
	for k, v := range over {
		cfg[k] = v
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	runs := []operatorRun{{name: "kueue", opts: localcluster.OperatorOptions{Config: string(b)}}}
	for _, name := range operators {
		runs = append(runs, operatorRun{name: name})
	}
	startOperators(t, runs...)
}

// shippedKueueConfig reads the Kueue configuration keys muster ships.
func shippedKueueConfig(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(manifestsDir(), "kueue", "kueue-config-fragment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("kueue-config-fragment.yaml: %v", err)
	}
	return cfg
}

func ensureNamespace(t *testing.T, name string) {
	t.Helper()
	_, err := controlPlane.Client.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// kueueQueues makes the test's ResourceFlavor and ClusterQueue (named ns)
// with gpus GPUs of quota and the LocalQueue "default" in ns, and removes
// the cluster-scoped two when the test ends.
func kueueQueues(t *testing.T, ns string, gpus int, preempt bool) {
	t.Helper()
	applyKueueQueues(t, localcluster.KueueQueues{
		ClusterQueue: ns, Namespace: ns, LocalQueue: "default", GPUs: gpus, PreemptLowerPriority: preempt,
	})
}

// applyKueueQueues applies q in q.Namespace and deletes its cluster-scoped
// objects when the test ends.
func applyKueueQueues(t *testing.T, q localcluster.KueueQueues) {
	t.Helper()
	applyYAML(t, q.Namespace, localcluster.KueueQueuesYAML(q))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, r := range []string{"clusterqueues", "resourceflavors", "topologies"} {
			gvr := schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: r}
			if err := controlPlane.Dynamic.Resource(gvr).Delete(ctx, q.ClusterQueue, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete %s %s: %v", r, q.ClusterQueue, err)
			}
		}
	})
}

// kueueJobSetYAML is a JobSet of one replicated Job of pods pods with gpus
// GPUs each, submitted to the LocalQueue "default", placed on pool by
// sched; priorityClass, if set, is the pods' and Kueue's priority.
func kueueJobSetYAML(name, pool, sched string, pods, gpus int, priorityClass string) string {
	prio := ""
	if priorityClass != "" {
		prio = "\n            priorityClassName: " + priorityClass
	}
	return fmt.Sprintf(`
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: %s
  labels: {kueue.x-k8s.io/queue-name: default}
spec:
  replicatedJobs:
  - name: workers
    replicas: %d
    template:
      spec:
        parallelism: 1
        completions: 1
        backoffLimit: 0
        template:
          spec:
            %s%s
            containers:
            - name: main
              image: busybox
              resources: {requests: {cpu: 100m}, limits: {nvidia.com/gpu: %d}}
`, name, pods, podPlacement(pool, sched, "            "), prio, gpus)
}

// kueueWorkload returns the Kueue Workload of the object kind/name in ns,
// or nil while there is none.
func kueueWorkload(ctx context.Context, ns, kind, name string) (*unstructured.Unstructured, error) {
	l, err := controlPlane.Dynamic.Resource(kueueWorkloadsGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range l.Items {
		for _, ref := range l.Items[i].GetOwnerReferences() {
			if ref.Kind == kind && ref.Name == name {
				return &l.Items[i], nil
			}
		}
	}
	return nil, nil
}

// workloadCondition returns the status and message of the Workload's
// condition of type typ ("" if it has none).
func workloadCondition(wl *unstructured.Unstructured, typ string) (status, message string) {
	conds, _, _ := unstructured.NestedSlice(wl.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == typ {
			s, _ := m["status"].(string)
			msg, _ := m["message"].(string)
			return s, msg
		}
	}
	return "", ""
}

// waitWorkloadCondition waits until the Workload of kind/name has the
// condition typ with status want, and returns the Workload.
func waitWorkloadCondition(t *testing.T, ns, kind, name, typ, want string) *unstructured.Unstructured {
	t.Helper()
	var wl *unstructured.Unstructured
	waitFor(t, localcluster.ShortTimeout, fmt.Sprintf("Workload of %s %s/%s %s=%s", kind, ns, name, typ, want), func(ctx context.Context) (bool, string, error) {
		var err error
		if wl, err = kueueWorkload(ctx, ns, kind, name); err != nil || wl == nil {
			return false, "no Workload yet", err
		}
		s, msg := workloadCondition(wl, typ)
		return s == want, fmt.Sprintf("%s=%q: %s", typ, s, msg), nil
	})
	return wl
}

// jobSetSuspended reports whether the JobSet's spec.suspend is true.
func jobSetSuspended(ctx context.Context, ns, name string) (bool, error) {
	js, err := controlPlane.Dynamic.Resource(jobsetsGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	s, _, err := unstructured.NestedBool(js.Object, "spec", "suspend")
	return s, err
}

// succeedAll finishes every pod matching selector in ns.
func succeedAll(t *testing.T, ns, selector string) {
	t.Helper()
	pods, err := controlPlane.Client.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if err := podSim.Succeed(t.Context(), ns, p.Name); err != nil {
			t.Fatal(err)
		}
	}
}

// TestKueueQuotaThenGang: two JobSets that each need the ClusterQueue's
// whole GPU quota. Kueue admits the first, whose gang muster binds whole;
// the second stays suspended with no pods while the first runs, and Kueue
// says why (the quota it needs); once the first finishes, the second is
// admitted and bound whole.
func TestKueueQuotaThenGang(t *testing.T) {
	startKueue(t, "", "jobset")
	ns, sched := gangTest(t, "kueue-quota-", 4, 4, nil)
	startPodGrouper(t, sched)
	kueueQueues(t, ns, 16, false)

	applyYAML(t, ns, kueueJobSetYAML("first", ns, sched, 4, 4, ""))
	waitWorkloadCondition(t, ns, "JobSet", "first", "Admitted", "True")
	applyYAML(t, ns, kueueJobSetYAML("second", ns, sched, 4, 4, ""))
	waitRunning(t, ns, "jobset.sigs.k8s.io/jobset-name=first", 4)

	wl := waitWorkloadCondition(t, ns, "JobSet", "second", "QuotaReserved", "False")
	if _, msg := workloadCondition(wl, "QuotaReserved"); !strings.Contains(msg, "nvidia.com/gpu") {
		t.Errorf("second's QuotaReserved message %q does not name nvidia.com/gpu", msg)
	}
	holdsFor(t, 3*time.Second, "second suspended with no pods while first runs", func(ctx context.Context) (bool, string, error) {
		suspended, err := jobSetSuspended(ctx, ns, "second")
		if err != nil {
			return false, "", err
		}
		pods, err := controlPlane.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "jobset.sigs.k8s.io/jobset-name=second"})
		if err != nil {
			return false, "", err
		}
		return suspended && len(pods.Items) == 0, fmt.Sprintf("suspend=%v, %d pods", suspended, len(pods.Items)), nil
	})

	// muster describe says which gate each is behind, in Kueue's terms.
	d := describeJSON(t, ns, "jobset/second")
	if d.Queue == nil {
		t.Fatalf("describe jobset/second: no queue view; warnings %v", d.Warnings)
	}
	want := "waiting for quota in ClusterQueue " + ns + ": needs 16 nvidia.com/gpu, 0 free"
	if d.Queue.State != "Pending" || !strings.Contains(d.Queue.Summary, want) {
		t.Errorf("describe jobset/second: queue %s %q, want Pending %q", d.Queue.State, d.Queue.Summary, want)
	}
	text, _, code := muster(t, "describe", "jobset/second", "-n", ns)
	if code != 0 || !strings.Contains(text, "Queue:") || !strings.Contains(text, want) {
		t.Errorf("describe jobset/second (exit %d) does not show %q:\n%s", code, want, text)
	}
	t.Logf("muster describe jobset/second:\n%s", text)
	if d := describeJSON(t, ns, "jobset/first"); d.Queue == nil || d.Queue.State != "Admitted" || d.Queue.ClusterQueue != ns {
		t.Errorf("describe jobset/first: queue %+v, want Admitted in %s", d.Queue, ns)
	}

	table, _, code := muster(t, "get", "-n", ns)
	if code != 0 || !strings.Contains(table, "QUEUE") || !strings.Contains(table, "Admitted ("+ns+")") || !strings.Contains(table, "Pending (localqueue default)") {
		t.Errorf("muster get -n %s (exit %d) lacks the QUEUE column or its states:\n%s", ns, code, table)
	}

	// muster fit answers both questions: the nodes (taken by first) and
	// the ClusterQueue's quota (taken too).
	file := filepath.Join(t.TempDir(), "third.yaml")
	if err := os.WriteFile(file, []byte(kueueJobSetYAML("third", ns, sched, 4, 4, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	fitOut, fitErr, code := muster(t, "fit", "-f", file, "-n", ns)
	if !strings.Contains(fitOut, "Queue: ClusterQueue "+ns+" lacks the quota: needs 16 nvidia.com/gpu, 0 free") {
		t.Errorf("muster fit -f third.yaml (exit %d) does not say the quota is short:\n%s%s", code, fitOut, fitErr)
	}
	if fitOut, _, _ := muster(t, "fit", "jobset/first", "-n", ns); !strings.Contains(fitOut, "admitted by Kueue to ClusterQueue "+ns) {
		t.Errorf("muster fit jobset/first does not say Kueue admitted it:\n%s", fitOut)
	}

	succeedAll(t, ns, "jobset.sigs.k8s.io/jobset-name=first")
	waitWorkloadCondition(t, ns, "JobSet", "first", "Finished", "True")
	waitWorkloadCondition(t, ns, "JobSet", "second", "Admitted", "True")
	waitRunning(t, ns, "jobset.sigs.k8s.io/jobset-name=second", 4)
}

// TestKueueWaitForPodsReadyNoPartialGang: Kueue's quota says yes, the
// nodes say no. Fillers outside Kueue hold 2 of the 4 GPUs of every node,
// so a JobSet of 2 pods × 4 GPUs fits the ClusterQueue but no node.
// muster binds none of its pods; Kueue's waitForPodsReady evicts it for
// PodsReadyTimeout and requeues it, twice, then deactivates it. No partial
// gang is bound at any point, and the fillers keep running.
func TestKueueWaitForPodsReadyNoPartialGang(t *testing.T) {
	startKueue(t, `waitForPodsReady:
  timeout: 4s
  requeuingStrategy: {timestamp: Eviction, backoffBaseSeconds: 1, backoffMaxSeconds: 2, backoffLimitCount: 2}
`, "jobset")
	ns, sched := gangTest(t, "kueue-ready-", 4, 4, nil)
	startPodGrouper(t, sched)
	kueueQueues(t, ns, 16, false)
	for i := range 4 {
		node := fmt.Sprintf("%s-%d", ns, i)
		if _, err := controlPlane.Client.CoreV1().Pods(ns).Create(t.Context(), makePod(ns, podSpec{
			name: "filler-" + node, pool: ns, gpus: 2,
			mutate: func(p *corev1.Pod) { p.Spec.NodeName = node; p.Labels["role"] = "filler" },
		}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitRunning(t, ns, "role=filler", 4)

	applyYAML(t, ns, kueueJobSetYAML("wide", ns, sched, 2, 4, ""))
	waitWorkloadCondition(t, ns, "JobSet", "wide", "Admitted", "True")
	// Admitted by quota, held by placement: describe names both gates.
	waitFor(t, localcluster.ShortTimeout, "describe jobset/wide: admitted by Kueue, gang pending", func(context.Context) (bool, string, error) {
		out, errOut, code := muster(t, "describe", "jobset/wide", "-n", ns, "-o", "json")
		if code != 0 {
			return false, errOut, nil
		}
		var d cli.Description
		if err := json.Unmarshal([]byte(out), &d); err != nil || d.Queue == nil {
			return false, "no queue view", err
		}
		return strings.HasPrefix(d.Queue.Summary, "admitted by Kueue; gang pending: ") && strings.Contains(d.Queue.Summary, "nvidia.com/gpu"), d.Queue.Summary, nil
	})
	sel := "jobset.sigs.k8s.io/jobset-name=wide"
	// Through admissions and evictions until Kueue gives up: not one pod
	// of the gang on a node, every filler still running.
	var evictions int64
	waitFor(t, localcluster.LongTimeout, "Kueue deactivates JobSet wide after its evictions, no pod of it ever bound", func(ctx context.Context) (bool, string, error) {
		pods, err := controlPlane.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		running := 0
		for _, p := range pods.Items {
			switch {
			case p.Labels["role"] == "filler" && p.Status.Phase == corev1.PodRunning:
				running++
			case strings.HasPrefix(p.Name, "wide-") && p.Spec.NodeName != "":
				return false, "", fmt.Errorf("pod %s of the unplaceable gang was bound to %s", p.Name, p.Spec.NodeName)
			}
		}
		if running != 4 {
			return false, "", fmt.Errorf("%d of 4 fillers running", running)
		}
		wl, err := kueueWorkload(ctx, ns, "JobSet", "wide")
		if err != nil || wl == nil {
			return false, "no Workload", err
		}
		// Kueue clears requeueState when it deactivates: keep the most seen.
		n, _, _ := unstructured.NestedInt64(wl.Object, "status", "requeueState", "count")
		evictions = max(evictions, n)
		active, found, _ := unstructured.NestedBool(wl.Object, "spec", "active")
		_, msg := workloadCondition(wl, "Evicted")
		return found && !active, fmt.Sprintf("active=%v evictions=%d: %s", active, evictions, msg), nil
	})
	if evictions < 2 {
		t.Errorf("Kueue requeued the workload %d times before deactivating it (most seen), want 2 (backoffLimitCount)", evictions)
	}
	// Suspended again, the JobSet's pods go, and none comes back.
	waitGone(t, ns, sel)
	holdsFor(t, 2*time.Second, "no pod of the deactivated JobSet wide", func(ctx context.Context) (bool, string, error) {
		pods, err := controlPlane.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		return err == nil && len(pods.Items) == 0, fmt.Sprintf("%d pods", len(pods.Items)), err
	})
	d := describeJSON(t, ns, "jobset/wide")
	if d.Queue == nil || d.Queue.State != "Inactive" || !strings.Contains(d.Queue.Summary, "deactivated by Kueue") {
		t.Errorf("describe jobset/wide: queue %+v, want Inactive", d.Queue)
	}
}

// TestKueuePriorityOneEvictionEach: two low-priority JobSets fill the
// ClusterQueue and the nodes; a high-priority one arrives. Kueue preempts
// one low workload to admit it, and muster places the high gang whole on
// what that frees. Neither system evicts anything else: the other low
// JobSet keeps the very pods it started with, the preempted one is evicted
// once and waits in the queue (no pods), and nothing loops.
func TestKueuePriorityOneEvictionEach(t *testing.T) {
	startKueue(t, "", "jobset")
	ns, sched := gangTest(t, "kueue-prio-", 4, 4, nil)
	startPodGrouper(t, sched)
	kueueQueues(t, ns, 16, true)
	low, high := ns+"-low", ns+"-high"
	cleanup, err := createPreemptClasses(t.Context(), t, map[string]int32{low: 100, high: 1000})
	t.Cleanup(cleanup)
	if err != nil {
		t.Fatal(err)
	}

	lows := []string{"low-a", "low-b"}
	startUIDs := map[string]map[types.UID]bool{}
	for _, name := range lows {
		applyYAML(t, ns, kueueJobSetYAML(name, ns, sched, 2, 4, low))
		waitWorkloadCondition(t, ns, "JobSet", name, "Admitted", "True")
		startUIDs[name] = map[types.UID]bool{}
		for _, p := range waitRunning(t, ns, "jobset.sigs.k8s.io/jobset-name="+name, 2) {
			startUIDs[name][p.UID] = true
		}
	}
	applyYAML(t, ns, kueueJobSetYAML("urgent", ns, sched, 2, 4, high))
	waitWorkloadCondition(t, ns, "JobSet", "urgent", "Admitted", "True")
	waitRunning(t, ns, "jobset.sigs.k8s.io/jobset-name=urgent", 2)

	// Which low one Kueue took: exactly one, evicted for preemption.
	var victim, survivor string
	for _, name := range lows {
		wl, err := kueueWorkload(t.Context(), ns, "JobSet", name)
		if err != nil || wl == nil {
			t.Fatalf("Workload of %s: %v", name, err)
		}
		if s, _ := workloadCondition(wl, "Admitted"); s == "True" {
			survivor = name
		} else {
			victim = name
		}
	}
	if victim == "" || survivor == "" {
		t.Fatalf("Kueue evicted %q and kept %q, want one of each", victim, survivor)
	}
	// For a while: the survivor's pods are the ones it started with, all
	// running; the victim has no pods and was evicted once; urgent runs.
	holdsFor(t, 4*time.Second, "survivor untouched, victim evicted once and queued, urgent running", func(ctx context.Context) (bool, string, error) {
		pods, err := controlPlane.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		byJobSet := map[string][]corev1.Pod{}
		for _, p := range pods.Items {
			byJobSet[p.Labels["jobset.sigs.k8s.io/jobset-name"]] = append(byJobSet[p.Labels["jobset.sigs.k8s.io/jobset-name"]], p)
		}
		for _, p := range byJobSet[survivor] {
			if !startUIDs[survivor][p.UID] || p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
				return false, fmt.Sprintf("survivor %s pod %s replaced or stopping (phase %s)", survivor, p.Name, p.Status.Phase), nil
			}
		}
		if len(byJobSet[survivor]) != 2 || len(byJobSet[victim]) != 0 {
			return false, fmt.Sprintf("survivor %d pods, victim %d pods", len(byJobSet[survivor]), len(byJobSet[victim])), nil
		}
		running := 0
		for _, p := range byJobSet["urgent"] {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		wl, err := kueueWorkload(ctx, ns, "JobSet", victim)
		if err != nil || wl == nil {
			return false, "", fmt.Errorf("Workload of %s: %v", victim, err)
		}
		evictions, _, _ := unstructured.NestedInt64(wl.Object, "status", "requeueState", "count")
		_, reason := workloadCondition(wl, "Evicted")
		return running == 2 && evictions <= 1, fmt.Sprintf("urgent %d running, victim evictions %d (%s)", running, evictions, reason), nil
	})
	d := describeJSON(t, ns, "jobset/"+victim)
	if d.Queue == nil || d.Queue.State == "Admitted" {
		t.Errorf("describe jobset/%s: queue %+v, want it waiting", victim, d.Queue)
	}
}

// TestKueueKinds: other kinds Kueue admits, through their real
// controllers: a plain Job ganged by muster's annotation (the Job
// controller) and a RayCluster (KubeRay: head and workers, one gang). Each
// is suspended by Kueue until admitted, then bound whole; a third, beyond
// what quota is left, gets no pods.
func TestKueueKinds(t *testing.T) {
	startKueue(t, "", "kuberay")
	ns, sched := gangTest(t, "kueue-kinds-", 4, 4, nil)
	startPodGrouper(t, sched)
	kueueQueues(t, ns, 12, false)

	job := func(name string, pods, gpus int) string {
		return fmt.Sprintf(`
apiVersion: batch/v1
kind: Job
metadata:
  name: %s
  labels: {kueue.x-k8s.io/queue-name: default}
  annotations: {muster.io/min-member: "%d"}
spec:
  parallelism: %d
  completions: %d
  template:
    metadata: {labels: {app: %s}}
    spec:
      %s
      restartPolicy: Never
      containers:
      - name: main
        image: busybox
        resources: {requests: {cpu: 100m}, limits: {nvidia.com/gpu: %d}}
`, name, pods, pods, pods, name, podPlacement(ns, sched, "      "), gpus)
	}
	applyYAML(t, ns, job("batch", 4, 2))
	ray := strings.Replace(rayClusterYAML("ray", ns, sched, 2, 2), "metadata: {name: ray}", "metadata: {name: ray, labels: {kueue.x-k8s.io/queue-name: default}}", 1)
	applyYAML(t, ns, ray)
	waitWorkloadCondition(t, ns, "Job", "batch", "Admitted", "True")
	waitWorkloadCondition(t, ns, "RayCluster", "ray", "Admitted", "True")
	waitRunning(t, ns, "app=batch", 4)
	waitRunning(t, ns, "ray.io/cluster=ray", 3)

	// 8 + 4 GPUs of 12 are held: a Job of 2 more GPUs waits, with no pods.
	applyYAML(t, ns, job("late", 1, 2))
	waitWorkloadCondition(t, ns, "Job", "late", "QuotaReserved", "False")
	holdsFor(t, 2*time.Second, "Job late suspended with no pods", func(ctx context.Context) (bool, string, error) {
		pods, err := controlPlane.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=late"})
		return err == nil && len(pods.Items) == 0, fmt.Sprintf("%d pods", len(pods.Items)), err
	})
	if d := describeJSON(t, ns, "job/late"); d.Queue == nil || !strings.Contains(d.Queue.Summary, "needs 2 nvidia.com/gpu, 0 free") {
		t.Errorf("describe job/late: queue %+v, want it waiting for 2 GPUs with 0 free", d.Queue)
	}
}

// TestKueueConfigFragment holds the Kueue configuration muster ships to
// both sides: every framework it enables is one this Kueue version knows
// (its own shipped configuration lists them) and one muster's catalog
// defines (AppWrapper aside: the catalog leaves it to the kinds it wraps),
// and waitForPodsReady waits well beyond muster-scheduler's Permit timeout,
// so Kueue never evicts a gang muster is still binding.
func TestKueueConfigFragment(t *testing.T) {
	cfg := shippedKueueConfig(t)
	modDir, err := operators.ModuleDir(t.Context(), "kueue")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(modDir, "config", "components", "manager", "controller_manager_config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var kueueDefault struct {
		Integrations struct{ Frameworks []string } `json:"integrations"`
	}
	if err := yaml.Unmarshal(b, &kueueDefault); err != nil {
		t.Fatal(err)
	}
	var ours struct {
		Integrations     struct{ Frameworks []string } `json:"integrations"`
		WaitForPodsReady struct {
			Timeout           string `json:"timeout"`
			BlockAdmission    *bool  `json:"blockAdmission"`
			RequeuingStrategy struct {
				Timestamp          string `json:"timestamp"`
				BackoffBaseSeconds int    `json:"backoffBaseSeconds"`
				BackoffMaxSeconds  int    `json:"backoffMaxSeconds"`
			} `json:"requeuingStrategy"`
		} `json:"waitForPodsReady"`
		ManageJobsWithoutQueueName *bool `json:"manageJobsWithoutQueueName"`
	}
	raw, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(raw, &ours); err != nil {
		t.Fatalf("kueue-config-fragment.yaml sets a key this test does not check: %v", err)
	}
	reg, err := catalog.NewRegistry(definition.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defined := map[string]bool{} // group/lower(kind)
	for _, e := range reg.List() {
		defined[strings.ToLower(e.GroupKind.Group+"/"+e.GroupKind.Kind)] = true
	}
	if len(ours.Integrations.Frameworks) == 0 {
		t.Fatal("no integrations.frameworks")
	}
	for _, fw := range ours.Integrations.Frameworks {
		if !slices.Contains(kueueDefault.Integrations.Frameworks, fw) {
			t.Errorf("framework %s: Kueue %s does not know it (it knows %v)", fw, modDir, kueueDefault.Integrations.Frameworks)
		}
		key := fw
		if !strings.Contains(fw, "/") {
			key = "/" + fw // core: pod
		}
		if fw == "workload.codeflare.dev/appwrapper" {
			continue // no definition on purpose (catalog/README.md); the wrapped kinds keep theirs
		}
		if !defined[key] {
			t.Errorf("framework %s: muster's catalog defines no such kind", fw)
		}
	}
	timeout, err := time.ParseDuration(ours.WaitForPodsReady.Timeout)
	if err != nil {
		t.Fatalf("waitForPodsReady.timeout %q: %v", ours.WaitForPodsReady.Timeout, err)
	}
	var sc struct {
		Profiles []struct {
			PluginConfig []struct {
				Args struct {
					PermitTimeoutSeconds int `json:"permitTimeoutSeconds"`
				} `json:"args"`
			} `json:"pluginConfig"`
		} `json:"profiles"`
	}
	scb, err := os.ReadFile(filepath.Join(manifestsDir(), "scheduler-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(scb, &sc); err != nil {
		t.Fatal(err)
	}
	permit := 0
	for _, p := range sc.Profiles {
		for _, pc := range p.PluginConfig {
			permit = max(permit, pc.Args.PermitTimeoutSeconds)
		}
	}
	if permit == 0 {
		t.Fatal("scheduler-config.yaml sets no permitTimeoutSeconds")
	}
	if timeout < 5*time.Duration(permit)*time.Second {
		t.Errorf("waitForPodsReady.timeout %s is less than 5× muster-scheduler's permitTimeoutSeconds %d", timeout, permit)
	}
	if b := ours.WaitForPodsReady.BlockAdmission; b == nil || *b {
		t.Errorf("waitForPodsReady.blockAdmission %v, want false (muster starts no gang partly)", b)
	}
	if rs := ours.WaitForPodsReady.RequeuingStrategy; rs.Timestamp != "Eviction" || rs.BackoffBaseSeconds <= 0 {
		t.Errorf("waitForPodsReady.requeuingStrategy %+v: want requeuing by eviction time, with a backoff", rs)
	}
	if m := ours.ManageJobsWithoutQueueName; m == nil || *m {
		t.Errorf("manageJobsWithoutQueueName %v, want false", m)
	}
}

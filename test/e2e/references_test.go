package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/localcluster"
)

// References (definition/doc.go, "References"): the embedded TrainJob
// definition reads the node count and the node resources of the
// (Cluster)TrainingRuntime a TrainJob names, on the in-process control
// plane. The runtime CRDs are Kubeflow Trainer's own from ../shared/corpus
// when it is there (so the fields the definition reads are the served
// schema's), else permissive ones of the same scope. TrainJobs and their pods
// are created by the test, as the Trainer and JobSet would: there is no
// Trainer operator here.

var (
	refCTBGVR     = schema.GroupVersionResource{Group: "grove.io", Version: "v1alpha1", Resource: "clustertopologybindings"}
	refCTRGVR     = schema.GroupVersionResource{Group: "trainer.kubeflow.org", Version: "v1alpha1", Resource: "clustertrainingruntimes"}
	refTRGVR      = schema.GroupVersionResource{Group: "trainer.kubeflow.org", Version: "v1alpha1", Resource: "trainingruntimes"}
	refTrainJobGV = "trainer.kubeflow.org/v1alpha1"
)

func init() {
	registerSetup("trainer runtime CRDs", func(ctx context.Context, cp *localcluster.ControlPlane) error {
		dir := filepath.Join(pgrRepoRoot(), "..", "shared", "corpus", "trainjob", "crd")
		for _, r := range []struct {
			file, kind, plural string
			scope              apiextensionsv1.ResourceScope
		}{
			{"trainer.kubeflow.org_clustertrainingruntimes.yaml", "ClusterTrainingRuntime", "clustertrainingruntimes", apiextensionsv1.ClusterScoped},
			{"trainer.kubeflow.org_trainingruntimes.yaml", "TrainingRuntime", "trainingruntimes", apiextensionsv1.NamespaceScoped},
		} {
			if _, err := cp.APIExtensions.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, r.plural+".trainer.kubeflow.org", metav1.GetOptions{}); err == nil {
				continue
			}
			path := filepath.Join(dir, r.file)
			if _, err := os.Stat(path); err == nil {
				if err := cp.InstallCRDFile(ctx, path); err != nil {
					return err
				}
				continue
			}
			if err := cp.InstallCRD(ctx, localcluster.PermissiveCRD("trainer.kubeflow.org", "v1alpha1", r.kind, r.plural, r.scope)); err != nil {
				return err
			}
		}
		// The root kind of TestReferencesKindServedLater's Karta.
		if err := cp.InstallCRD(ctx, localcluster.PermissiveCRD(fcGroup, "v1", "RefRun", "refruns", apiextensionsv1.NamespaceScoped)); err != nil {
			return err
		}
		// Grove's topology object; the corpus has no CRD of it, so a
		// permissive one of its scope (grove.io/v1alpha1, cluster-scoped).
		if _, err := cp.APIExtensions.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "clustertopologybindings.grove.io", metav1.GetOptions{}); err == nil {
			return nil
		}
		return cp.InstallCRD(ctx, localcluster.PermissiveCRD("grove.io", "v1alpha1", "ClusterTopologyBinding", "clustertopologybindings", apiextensionsv1.ClusterScoped))
	})
}

// refRuntime is a (Cluster)TrainingRuntime of numNodes nodes with gpus per
// node container, shaped like Kubeflow's torch-distributed runtime.
func refRuntime(kind, ns, name string, numNodes, gpus int64) *unstructured.Unstructured {
	md := map[string]any{"name": name}
	if ns != "" {
		md["namespace"] = ns
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": refTrainJobGV, "kind": kind, "metadata": md,
		"spec": map[string]any{
			"mlPolicy": map[string]any{"numNodes": numNodes, "torch": map[string]any{}},
			"template": map[string]any{"spec": map[string]any{"replicatedJobs": []any{map[string]any{
				"name": "node",
				"template": map[string]any{
					"metadata": map[string]any{"labels": map[string]any{"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
					"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{
						"name": "node", "image": "registry.invalid/torch",
						"resources": map[string]any{"limits": map[string]any{string(localcluster.DefaultGPUResource): fmt.Sprint(gpus)}},
					}}}}},
				},
			}}}},
		},
	}}
}

// refCreateRuntime creates a runtime; a cluster-scoped one is deleted when
// t ends (a namespaced one goes with the test's namespace).
func refCreateRuntime(t *testing.T, rt *unstructured.Unstructured) {
	t.Helper()
	var ri dynamic.ResourceInterface = controlPlane.Dynamic.Resource(refCTRGVR)
	if rt.GetNamespace() != "" {
		ri = controlPlane.Dynamic.Resource(refTRGVR).Namespace(rt.GetNamespace())
	}
	if _, err := ri.Create(context.Background(), rt, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if rt.GetNamespace() == "" {
		t.Cleanup(func() {
			if err := ri.Delete(context.Background(), rt.GetName(), metav1.DeleteOptions{}); err != nil {
				t.Errorf("deleting %s %s: %v", rt.GetKind(), rt.GetName(), err)
			}
		})
	}
}

// refTrainJob creates a TrainJob naming runtime (kind "" leaves the CRD's
// default, ClusterTrainingRuntime, to the definition) and, as the Trainer
// and JobSet would, n trainer pods with JobSet's labels. numNodes 0 leaves
// the count and the node resources to the runtime; otherwise the TrainJob
// says both (2 GPUs a node) and never needs it.
func refTrainJob(t *testing.T, ns, name, sched, kind, runtime string, numNodes int64, n int) {
	t.Helper()
	ref := map[string]any{"name": runtime, "apiGroup": "trainer.kubeflow.org"}
	if kind != "" {
		ref["kind"] = kind
	}
	trainer := map[string]any{"image": "registry.invalid/train"}
	if numNodes > 0 {
		trainer["numNodes"] = numNodes
		trainer["resourcesPerNode"] = map[string]any{"limits": map[string]any{string(localcluster.DefaultGPUResource): "2"}}
	}
	tj := pgrCreate(t, ns, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": refTrainJobGV, "kind": "TrainJob",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"runtimeRef": ref, "trainer": trainer},
	}})
	for i := range n {
		p := makePod(ns, podSpec{name: fmt.Sprintf("%s-node-0-%d", name, i), scheduler: sched, pool: ns, gpus: 2, mutate: func(p *corev1.Pod) {
			p.Labels["jobset.sigs.k8s.io/jobset-name"] = name
			p.Labels["jobset.sigs.k8s.io/replicatedjob-name"] = "node"
			p.Labels["jobset.sigs.k8s.io/job-index"] = "0"
			p.Labels["trainer.kubeflow.org/trainjob-ancestor-step"] = "trainer"
			p.OwnerReferences = []metav1.OwnerReference{pgrControllerRef(tj)}
		}})
		if _, err := controlPlane.Client.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func refSelector(name string) string { return "jobset.sigs.k8s.io/jobset-name=" + name }

// refWaitingWith is fcWaiting plus: every pod's grouping reason holds each
// of want.
func refWaitingWith(ns, selector string, n int, want []string) localcluster.Condition {
	waiting := fcWaiting(ns, selector, n)
	return func(ctx context.Context) (bool, string, error) {
		ok, seen, err := waiting(ctx)
		if err != nil || !ok {
			return ok, seen, err
		}
		l, err := controlPlane.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, "", err
		}
		for _, p := range l.Items {
			if r := p.Annotations[api.AnnotationGroupingReason]; p.Annotations[api.AnnotationGrouping] != api.GroupingWaiting || !containsAll(r, want) {
				return false, fmt.Sprintf("pod %s: %s=%q, reason %q", p.Name, api.AnnotationGrouping, p.Annotations[api.AnnotationGrouping], r), nil
			}
		}
		return true, seen, nil
	}
}

// refPodGroupGPUs is fcGang plus the PodGroup's GPUs.
func refPodGroupGPUs(t *testing.T, ns, selector string, n int, minMember int32, gpus int64) localcluster.Condition {
	return refPodGroupIs(t, ns, selector, n, minMember, func(pg *schedv1alpha1.PodGroup) (bool, string) {
		return catGPUs(pg) == gpus, fmt.Sprintf("%d GPUs", catGPUs(pg))
	})
}

// refPodGroupIs is fcGang plus ok of the pods' PodGroup.
func refPodGroupIs(t *testing.T, ns, selector string, n int, minMember int32, ok func(*schedv1alpha1.PodGroup) (bool, string)) localcluster.Condition {
	gang := fcGang(t, ns, selector, n, "", minMember, false)
	return func(ctx context.Context) (bool, string, error) {
		done, seen, err := gang(ctx)
		if err != nil || !done {
			return done, seen, err
		}
		l, err := controlPlane.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil || len(l.Items) == 0 {
			return false, seen, err
		}
		pg, err := podGroups(t).SchedulingV1alpha1().PodGroups(ns).Get(ctx, l.Items[0].Labels[api.LabelPodGroup], metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		good, what := ok(pg)
		return good, seen + ", " + what, nil
	}
}

// TestReferencesTrainJobRuntime: a TrainJob without numNodes takes the
// count and the GPUs of its ClusterTrainingRuntime (4 nodes × 2 GPUs); one
// whose namespaced runtime does not exist yet waits with the reason, while
// a TrainJob with its own numNodes and another workload type are grouped
// meanwhile; creating the runtime groups the waiting pods; a change of
// the runtime's numNodes follows into the PodGroup.
func TestReferencesTrainJobRuntime(t *testing.T) {
	const sched = "refs-e2e"
	startPodGrouper(t, sched)
	ns := testNamespace(t, "refs-")
	ctx := context.Background()

	// The runtime exists: min-member and GPUs are the runtime's.
	cluster := "refs-torch-" + ns
	refCreateRuntime(t, refRuntime("ClusterTrainingRuntime", "", cluster, 4, 2))
	refTrainJob(t, ns, "from-runtime", sched, "", cluster, 0, 4)
	waitFor(t, gangTimeout, "TrainJob from-runtime grouped by its ClusterTrainingRuntime", refPodGroupGPUs(t, ns, refSelector("from-runtime"), 4, 4, 8))
	// The CLI reads the runtime too.
	if d := describeJSON(t, ns, "trainjob/from-runtime"); len(d.Plans) != 1 || d.Plans[0].MinMember != 4 || strings.Contains(strings.Join(d.Warnings, "\n"), "not resolved") {
		t.Errorf("muster describe trainjob/from-runtime: plans %+v, warnings %q; want min-member 4 and the runtime resolved", d.Plans, d.Warnings)
	}

	// The runtime is missing: the pods wait and say why, for as long as it
	// is missing.
	refTrainJob(t, ns, "later", sched, "TrainingRuntime", "torch-later", 0, 4)
	want := []string{"TrainJob/" + ns + "/later", "reads $runtime", "TrainingRuntime " + ns + "/torch-later does not exist", "the gang depends on it"}
	waitFor(t, gangTimeout, "TrainJob later waiting for its runtime", refWaitingWith(ns, refSelector("later"), 4, want))
	// Meanwhile a TrainJob that says its count itself never reads the
	// missing runtime, and other kinds are grouped as ever.
	refTrainJob(t, ns, "own-count", sched, "TrainingRuntime", "torch-later", 2, 2)
	waitFor(t, gangTimeout, "TrainJob own-count grouped without its runtime", fcGang(t, ns, refSelector("own-count"), 2, "", 2, false))
	fcHealthyGang(t, ns, sched, "healthy")
	holdsFor(t, fcHold, "TrainJob later still waiting", refWaitingWith(ns, refSelector("later"), 4, want))
	d := describeJSON(t, ns, "trainjob/later")
	if notResolved := "reference $runtime (TrainingRuntime " + ns + "/torch-later) not resolved: not found in the cluster; assumed null"; !containsAll(strings.Join(d.Warnings, "\n"), []string{notResolved}) {
		t.Errorf("muster describe trainjob/later: warnings %q, want %q", d.Warnings, notResolved)
	}
	events, err := fcEvents(ctx, ns, "TrainJob", "later", "GangUnknown")
	if err != nil {
		t.Fatal(err)
	}
	if len(events) == 0 || !containsAll(events[0].Message, want) {
		t.Errorf("events on TrainJob later: %+v, want a GangUnknown event saying %q", events, want)
	}

	// The runtime arrives: the waiting pods are grouped without any pod
	// event, by the runtime's count.
	created := time.Now()
	refCreateRuntime(t, refRuntime("TrainingRuntime", ns, "torch-later", 4, 1))
	waitFor(t, gangTimeout, "TrainJob later grouped once its runtime exists", refPodGroupGPUs(t, ns, refSelector("later"), 4, 4, 4))
	t.Logf("runtime created → waiting pods grouped in %s", time.Since(created).Round(time.Millisecond))

	// The runtime changes: the PodGroup follows.
	rt, err := controlPlane.Dynamic.Resource(refTRGVR).Namespace(ns).Get(ctx, "torch-later", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(rt.Object, int64(3), "spec", "mlPolicy", "numNodes"); err != nil {
		t.Fatal(err)
	}
	updated := time.Now()
	if _, err := controlPlane.Dynamic.Resource(refTRGVR).Namespace(ns).Update(ctx, rt, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, gangTimeout, "PodGroup of later follows the runtime to 3", refPodGroupGPUs(t, ns, refSelector("later"), 4, 3, 3))
	t.Logf("runtime updated → PodGroup min-member 3 in %s", time.Since(updated).Round(time.Millisecond))
	if got := strings.Join(podGroupNames(t, ns), ","); strings.Count(got, ",") != 3 {
		t.Errorf("PodGroups %s, want 4 (three TrainJobs and the JobSet)", got)
	}
}

// refPodCliqueSet creates a PodCliqueSet of one replica with one clique of n
// pods that must pack within domain required of the ClusterTopologyBinding
// binding, and, as Grove would, its n pods (owned by the PCS here: there
// is no Grove operator; the owner walk reaches the PCS either way).
func refPodCliqueSet(t *testing.T, ns, name, sched, binding, required string, n int) {
	t.Helper()
	pcs := pgrCreate(t, ns, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "grove.io/v1alpha1", "kind": "PodCliqueSet",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{"replicas": int64(1), "template": map[string]any{
			"topologyConstraint": map[string]any{"topologyName": binding, "pack": map[string]any{"required": required}},
			"cliques": []any{map[string]any{"name": "worker", "spec": map[string]any{
				"roleName": "worker", "replicas": int64(n),
				"podSpec": map[string]any{"containers": []any{map[string]any{"name": "w", "image": "registry.invalid/engine"}}},
			}}},
		}},
	}})
	for i := range n {
		p := makePod(ns, podSpec{name: fmt.Sprintf("%s-0-worker-%d", name, i), scheduler: sched, pool: ns, gpus: 1, mutate: func(p *corev1.Pod) {
			p.Labels["app.kubernetes.io/part-of"] = name
			p.Labels["grove.io/podclique"] = name + "-0-worker"
			p.Labels["grove.io/podcliqueset-replica-index"] = "0"
			p.OwnerReferences = []metav1.OwnerReference{pgrControllerRef(pcs)}
		}})
		if _, err := controlPlane.Client.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// refTopology is a Condition: the PodGroup of the pods of ns matching
// selector packs on key (its muster.io/topology-required annotation).
func refTopology(t *testing.T, ns, selector string, n int, minMember int32, key string) localcluster.Condition {
	return refPodGroupIs(t, ns, selector, n, minMember, func(pg *schedv1alpha1.PodGroup) (bool, string) {
		got := pg.Annotations[api.AnnotationTopologyRequired]
		return got == key, fmt.Sprintf("topology %q", got)
	})
}

// TestReferencesGroveTopology: a PodCliqueSet's topologyConstraint domain
// becomes its PodGroup's node label key through the ClusterTopologyBinding
// it names; with the binding missing the pods wait and say why, and its
// creation groups them.
func TestReferencesGroveTopology(t *testing.T) {
	const sched = "refs-grove"
	startPodGrouper(t, sched)
	ns := testNamespace(t, "refs-grove-")
	ctx := context.Background()
	binding := "refs-" + ns
	ri := controlPlane.Dynamic.Resource(refCTBGVR)
	create := func() {
		t.Helper()
		if _, err := ri.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "grove.io/v1alpha1", "kind": "ClusterTopologyBinding",
			"metadata": map[string]any{"name": binding},
			"spec": map[string]any{"levels": []any{
				map[string]any{"domain": "rack", "key": "example.com/rack"},
				map[string]any{"domain": "host", "key": "kubernetes.io/hostname"},
			}},
		}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := ri.Delete(context.Background(), binding, metav1.DeleteOptions{}); err != nil {
				t.Errorf("deleting ClusterTopologyBinding %s: %v", binding, err)
			}
		})
	}

	refPodCliqueSet(t, ns, "early", sched, binding, "rack", 2)
	want := []string{"PodCliqueSet/" + ns + "/early", "reads $topology", "ClusterTopologyBinding " + binding + " does not exist", "the gang depends on it"}
	waitFor(t, gangTimeout, "PodCliqueSet early waiting for its topology binding", refWaitingWith(ns, "app.kubernetes.io/part-of=early", 2, want))
	holdsFor(t, fcHold, "PodCliqueSet early still waiting", refWaitingWith(ns, "app.kubernetes.io/part-of=early", 2, want))

	create()
	waitFor(t, gangTimeout, "PodCliqueSet early packed by rack once the binding exists", refTopology(t, ns, "app.kubernetes.io/part-of=early", 2, 2, "example.com/rack"))
	refPodCliqueSet(t, ns, "by-host", sched, binding, "host", 3)
	waitFor(t, gangTimeout, "PodCliqueSet by-host packed by host", refTopology(t, ns, "app.kubernetes.io/part-of=by-host", 3, 3, "kubernetes.io/hostname"))

	// A domain the binding does not define: the pods wait, and the reason
	// names it.
	refPodCliqueSet(t, ns, "by-row", sched, binding, "row", 2)
	waitFor(t, gangTimeout, "PodCliqueSet by-row waiting", refWaitingWith(ns, "app.kubernetes.io/part-of=by-row", 2,
		[]string{"requires the domain row, which ClusterTopologyBinding " + binding + " does not define"}))
}

// TestReferencesKindServedLater: a cluster Karta whose gang reads an object
// of a kind the cluster does not serve yet holds the pods and says so; once
// the CRD is installed and the object created, the pods are grouped by it
// without any event on them (the pod-grouper looks again after
// unmappedRecheck, 30 s, since no informer can watch a kind not served).
func TestReferencesKindServedLater(t *testing.T) {
	const sched = "refs-later"
	startPodGrouper(t, sched)
	ns := testNamespace(t, "refs-later-")
	ctx := context.Background()
	group := "later.refs.muster.io"
	karta := fcKartaObject("refs-served-later", "RefRun", ".spec.replicas // $cfg.spec.replicas")
	karta["metadata"].(map[string]any)["annotations"] = map[string]any{"muster.io/references": fcJSON(t, []any{map[string]any{
		"name": "cfg", "namePath": ".spec.configName",
		"kinds": []any{map[string]any{"group": group, "version": "v1", "kind": "RefConfig"}},
	}})}
	pgrApplyKarta(t, fcJSON(t, karta))
	pgrWaitKartaValid(t, "refs-served-later", "True", "")

	run := fcRunObject(t, ns, "RefRun", "run", sched, 0)
	unstructured.RemoveNestedField(run.Object, "spec", "replicas")
	if err := unstructured.SetNestedField(run.Object, "three", "spec", "configName"); err != nil {
		t.Fatal(err)
	}
	run = pgrCreate(t, ns, run)
	for i := range 3 {
		p := makePod(ns, podSpec{name: fmt.Sprintf("run-%d", i), scheduler: sched, pool: ns, gpus: 1, mutate: func(p *corev1.Pod) {
			p.Labels[fcRunLabel] = "run"
			p.OwnerReferences = []metav1.OwnerReference{pgrControllerRef(run)}
		}})
		if _, err := controlPlane.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"RefRun/" + ns + "/run", "reads $cfg", "RefConfig " + ns + "/three is of a kind the cluster does not serve (" + group + "/v1, Kind=RefConfig)"}
	waitFor(t, gangTimeout, "pods waiting for a kind not served", refWaitingWith(ns, fcSelector("run"), 3, want))

	if err := controlPlane.InstallCRD(ctx, localcluster.PermissiveCRD(group, "v1", "RefConfig", "refconfigs", apiextensionsv1.NamespaceScoped)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := controlPlane.APIExtensions.ApiextensionsV1().CustomResourceDefinitions().Delete(context.Background(), "refconfigs."+group, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting the RefConfig CRD: %v", err)
		}
	})
	cfgGVR := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "refconfigs"}
	if _, err := controlPlane.Dynamic.Resource(cfgGVR).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": group + "/v1", "kind": "RefConfig",
		"metadata": map[string]any{"name": "three", "namespace": ns},
		"spec":     map[string]any{"replicas": int64(3)},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Minute, "pods grouped by the RefConfig once its kind is served", fcGang(t, ns, fcSelector("run"), 3, "", 3, false))
}

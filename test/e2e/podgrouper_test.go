package e2e

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	pginformers "sigs.k8s.io/scheduler-plugins/pkg/generated/informers/externalversions"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/catalog"
	"github.com/muster-io/muster/cmd/muster-podgrouper/app"
	"github.com/muster-io/muster/definition"
	"github.com/muster-io/muster/localcluster"
	"github.com/muster-io/muster/podgrouper"
)

// The pod-grouper tests run their own pod-grouper in-process for a scheduler
// name of their own, so they never group another test's pods. No scheduler
// serves these names: the tests assert PodGroups and pod metadata, not
// binding.

var (
	pgrJobSetGVR   = schema.GroupVersionResource{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"}
	pgrLWSGVR      = schema.GroupVersionResource{Group: "leaderworkerset.x-k8s.io", Version: "v1", Resource: "leaderworkersets"}
	pgrTrainingRun = schema.GroupVersionResource{Group: "acme.example.com", Version: "v1", Resource: "trainingruns"}
)

func init() {
	registerSetup("pod-grouper CRDs", func(ctx context.Context, cp *localcluster.ControlPlane) error {
		root := pgrRepoRoot()
		// The shipped CRDs, so a broken generated file fails here.
		for _, f := range []string{"run.ai_kartas.yaml", "scheduling.x-k8s.io_podgroups.yaml"} {
			if err := cp.InstallCRDFile(ctx, filepath.Join(root, "manifests", "crds", f)); err != nil {
				return err
			}
		}
		crds := []*apiextensionsv1.CustomResourceDefinition{
			localcluster.PermissiveCRD("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets", apiextensionsv1.NamespaceScoped, "js"),
			localcluster.PermissiveCRD("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet", "leaderworkersets", apiextensionsv1.NamespaceScoped),
			localcluster.PermissiveCRD("acme.example.com", "v1", "TrainingRun", "trainingruns", apiextensionsv1.NamespaceScoped),
		}
		fixtures, err := pgrFixtureKinds(root)
		if err != nil {
			return err
		}
		crds = append(crds, fixtures...)
		for _, crd := range crds {
			// Leave a CRD another test installed (possibly the real one) alone.
			if _, err := cp.APIExtensions.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{}); err == nil {
				continue
			}
			if err := cp.InstallCRD(ctx, crd); err != nil {
				return err
			}
		}
		return nil
	})
}

func pgrRepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// pgrFixtureKinds returns a permissive CRD for every custom kind the catalog
// fixtures create (roots and children).
func pgrFixtureKinds(root string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	seen := map[schema.GroupVersionKind]bool{}
	var out []*apiextensionsv1.CustomResourceDefinition
	dirs, err := filepath.Glob(filepath.Join(root, "catalog", "testdata", "*", "object.yaml"))
	if err != nil {
		return nil, err
	}
	for _, obj := range dirs {
		for _, f := range []string{obj, filepath.Join(filepath.Dir(obj), "children.yaml")} {
			docs, err := pgrReadDocs(f)
			if err != nil {
				return nil, err
			}
			for _, d := range docs {
				gvk := d.GroupVersionKind()
				if pgrBuiltinGroup(gvk.Group) || seen[gvk] {
					continue
				}
				seen[gvk] = true
				plural := strings.ToLower(gvk.Kind) + "s"
				out = append(out, pgrApproved(localcluster.PermissiveCRD(gvk.Group, gvk.Version, gvk.Kind, plural, apiextensionsv1.NamespaceScoped)))
			}
		}
	}
	return out, nil
}

// pgrCRDGroupsUnderK8sIO are CRD groups of operators that predate the
// x-k8s.io convention and sit under k8s.io, which otherwise holds the
// kube-apiserver's own groups.
var pgrCRDGroupsUnderK8sIO = map[string]bool{"sparkoperator.k8s.io": true}

// pgrBuiltinGroup tells whether the kube-apiserver serves group itself, so
// a fixture of that group needs no CRD.
func pgrBuiltinGroup(group string) bool {
	return group == "" || group == "apps" || group == "batch" ||
		strings.HasSuffix(group, ".k8s.io") && !strings.Contains(group, "x-k8s.io") && !pgrCRDGroupsUnderK8sIO[group]
}

// pgrApproved marks a CRD of a protected group (*.k8s.io) the way the
// apiserver requires (the operators' real CRDs carry the same annotation
// with the link to their approval).
func pgrApproved(crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinition {
	if strings.HasSuffix(crd.Spec.Group, ".k8s.io") {
		if crd.Annotations == nil {
			crd.Annotations = map[string]string{}
		}
		crd.Annotations["api-approved.kubernetes.io"] = "unapproved, a permissive copy for tests"
	}
	return crd
}

func pgrReadDocs(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	docs, err := localcluster.SplitYAML(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []*unstructured.Unstructured
	for i, d := range docs {
		u := &unstructured.Unstructured{}
		if err := json.Unmarshal(d, &u.Object); err != nil {
			return nil, fmt.Errorf("%s document %d: %w", path, i+1, err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
	return out, nil
}

// pgrBenchWorkers is the pod-grouper's worker count in the benchmark
// (MUSTER_BENCH_PODGROUPER_WORKERS, default 16).
var pgrBenchWorkers = func() int {
	var n int
	if _, err := fmt.Sscan(os.Getenv("MUSTER_BENCH_PODGROUPER_WORKERS"), &n); err != nil || n < 1 {
		return 16
	}
	return n
}()

// pgrBenchRate is the pod creation rate of the benchmark
// (MUSTER_BENCH_PODGROUPER_RATE pods/s, default 500).
var pgrBenchRate = func() int {
	var n int
	if _, err := fmt.Sscan(os.Getenv("MUSTER_BENCH_PODGROUPER_RATE"), &n); err != nil || n < 1 {
		return 500
	}
	return n
}()

// pgrController is an in-process pod-grouper.
type pgrController struct {
	ctrl   *podgrouper.Controller
	cancel context.CancelFunc
	done   chan struct{}
}

func (c *pgrController) stop() {
	c.cancel()
	<-c.done
}

// pgrTest gives a pod-grouper test its namespace and a pod-grouper of its
// own for the scheduler name pgr-<ns>.
func pgrTest(t testing.TB, prefix string) (ns, sched string) {
	t.Helper()
	ns = testNamespace(t, prefix)
	sched = "pgr-" + ns
	startPodGrouper(t, sched)
	return ns, sched
}

// startPodGrouper runs a pod-grouper for schedulerName until stop is called
// or the test ends.
func startPodGrouper(t testing.TB, schedulerName string) *pgrController {
	t.Helper()
	return startPodGrouperWorkers(t, schedulerName, 4)
}

func startPodGrouperWorkers(t testing.TB, schedulerName string, workers int) *pgrController {
	t.Helper()
	return startPodGrouperWithConfig(t, controlPlane.RestConfig, schedulerName, workers)
}

// startPodGrouperWithConfig is startPodGrouperWorkers with the pod-grouper's
// own rest config (the benchmark counts its requests).
func startPodGrouperWithConfig(t testing.TB, cfg *rest.Config, schedulerName string, workers int) *pgrController {
	t.Helper()
	clients, err := podgrouper.NewClients(cfg)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := catalog.NewRegistry(definition.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ctx = klog.NewContext(ctx, klog.Background().WithValues("podgrouper", schedulerName))
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: controlPlane.Client.CoreV1().Events("")})
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: podgrouper.FieldManager})
	ctrl, err := podgrouper.NewController(ctx, clients, podgrouper.NewCheckedCatalogDefinitions(ctx, reg, clients), recorder, podgrouper.Options{SchedulerNames: []string{schedulerName}})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	c := &pgrController{ctrl: ctrl, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		defer broadcaster.Shutdown()
		if err := ctrl.Run(ctx, workers); err != nil {
			t.Errorf("pod-grouper: %v", err)
		}
	}()
	t.Cleanup(c.stop)
	if err := localcluster.WaitFor(ctx, time.Minute, "pod-grouper ready", func(context.Context) (bool, string, error) {
		return ctrl.HasSynced(), "", nil
	}); err != nil {
		t.Fatal(err)
	}
	return c
}

// pgrGPUPodSpec is a pod spec with gpus GPUs for the scheduler sched.
func pgrGPUPodSpec(sched string, gpus int64) corev1.PodSpec {
	q := resource.NewQuantity(gpus, resource.DecimalSI)
	return corev1.PodSpec{
		SchedulerName: sched,
		RestartPolicy: corev1.RestartPolicyNever,
		Containers: []corev1.Container{{
			Name: "main", Image: "busybox",
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{"nvidia.com/gpu": *q, corev1.ResourceCPU: resource.MustParse("1")},
				Limits:   corev1.ResourceList{"nvidia.com/gpu": *q},
			},
		}},
	}
}

func pgrToMap(t testing.TB, v any) map[string]any {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func pgrControllerRef(u *unstructured.Unstructured) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Name: u.GetName(), UID: u.GetUID(), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
}

// pgrWaitPodGroup waits for the PodGroup ns/name to satisfy ok.
func pgrWaitPodGroup(t testing.TB, ns, name string, what string, ok func(*schedv1alpha1.PodGroup) bool) *schedv1alpha1.PodGroup {
	t.Helper()
	var got *schedv1alpha1.PodGroup
	err := localcluster.WaitFor(context.Background(), time.Minute, fmt.Sprintf("PodGroup %s/%s %s", ns, name, what), func(ctx context.Context) (bool, string, error) {
		pg, err := podGroups(t).SchedulingV1alpha1().PodGroups(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, "not found", nil
		}
		if err != nil {
			return false, "", err
		}
		got = pg
		return ok(pg), fmt.Sprintf("minMember=%d minResources=%v labels=%v", pg.Spec.MinMember, pg.Spec.MinResources, pg.Labels), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// pgrWaitPods waits until every pod of ns matching selector satisfies ok,
// and there are n of them.
func pgrWaitPods(t testing.TB, ns, selector string, n int, what string, ok func(*corev1.Pod) bool) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	err := localcluster.WaitFor(context.Background(), time.Minute, fmt.Sprintf("%d pods (%s) in %s %s", n, selector, ns, what), func(ctx context.Context) (bool, string, error) {
		l, err := controlPlane.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, "", err
		}
		pods = l.Items
		good := 0
		var seen []string
		for i := range l.Items {
			p := &l.Items[i]
			if ok(p) {
				good++
			}
			seen = append(seen, fmt.Sprintf("%s labels=%v annotations=%v", p.Name, p.Labels, p.Annotations))
		}
		return len(l.Items) == n && good == n, strings.Join(seen, "; "), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pods
}

func pgrInGroup(name string) func(*corev1.Pod) bool {
	return func(p *corev1.Pod) bool {
		return p.Labels[api.LabelPodGroup] == name && !api.ScheduledAlone(p.Annotations)
	}
}

func pgrAlone(reasonPart string) func(*corev1.Pod) bool {
	return func(p *corev1.Pod) bool {
		return p.Annotations[api.AnnotationGrouping] == api.GroupingNone &&
			strings.Contains(p.Annotations[api.AnnotationGroupingReason], reasonPart) &&
			p.Labels[api.LabelPodGroup] == ""
	}
}

// TestPodGrouperDeploymentAlone: a Deployment has no gang instruction, so
// its pods (made by the real Deployment and ReplicaSet controllers) are
// marked to be scheduled alone.
func TestPodGrouperDeploymentAlone(t *testing.T) {
	ns, sched := pgrTest(t, "pgr-deploy")
	labels := map[string]string{"app": "web"}
	spec := pgrGPUPodSpec(sched, 0)
	spec.RestartPolicy = corev1.RestartPolicyAlways
	d := map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web"},
		"spec": map[string]any{
			"replicas": 3,
			"selector": map[string]any{"matchLabels": labels},
			"template": map[string]any{"metadata": map[string]any{"labels": labels}, "spec": pgrToMap(t, spec)},
		},
	}
	if _, err := controlPlane.Create(context.Background(), &unstructured.Unstructured{Object: d}, ns); err != nil {
		t.Fatal(err)
	}
	pgrWaitPods(t, ns, "app=web", 3, "scheduled alone", pgrAlone("definition deployment has no gang instruction"))
	if names := podGroupNames(t, ns); len(names) != 0 {
		t.Errorf("PodGroups in %s: %v; want none", ns, names)
	}
}

// pgrCreate creates obj in ns and returns it as created.
func pgrCreate(t testing.TB, ns string, obj *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	created, err := controlPlane.Create(context.Background(), obj, ns)
	if err != nil {
		t.Fatal(err)
	}
	return created
}

// pgrJobSet is a JobSet of a leader (1 pod) and workers (replicas pods),
// 4 GPUs each.
func pgrJobSet(t testing.TB, name, sched string, workers int) *unstructured.Unstructured {
	rj := func(n string, replicas int) map[string]any {
		return map[string]any{
			"name": n, "replicas": replicas,
			"template": map[string]any{"spec": map[string]any{
				"parallelism": 1, "completions": 1, "completionMode": "Indexed",
				"template": map[string]any{"spec": pgrToMap(t, pgrGPUPodSpec(sched, 4))},
			}},
		}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"replicatedJobs": []any{rj("leader", 1), rj("workers", workers)},
			"successPolicy":  map[string]any{"operator": "All"},
			"startupPolicy":  map[string]any{"startupPolicyOrder": "AnyOrder"},
			"network":        map[string]any{"enableDNSHostnames": true},
		},
	}}
}

// pgrCreateJobSetJob creates Job <js>-<rjob>-<i> as the JobSet operator
// does: its labels on the Job and its pod template, owned by the JobSet. The
// real Job controller creates the pod.
func pgrCreateJobSetJob(t testing.TB, js *unstructured.Unstructured, rjob string, i int, sched string) {
	t.Helper()
	pgrCreateJobSetJobWith(t, js, rjob, i, sched, nil)
}

// pgrCreateJobSetJobWith is pgrCreateJobSetJob with the pod spec changed by
// mutate (nil: unchanged).
func pgrCreateJobSetJobWith(t testing.TB, js *unstructured.Unstructured, rjob string, i int, sched string, mutate func(*corev1.PodSpec)) {
	t.Helper()
	labels := map[string]string{
		"jobset.sigs.k8s.io/jobset-name":        js.GetName(),
		"jobset.sigs.k8s.io/replicatedjob-name": rjob,
		"jobset.sigs.k8s.io/job-index":          fmt.Sprint(i),
		"jobset.sigs.k8s.io/jobset-uid":         string(js.GetUID()),
	}
	spec := pgrGPUPodSpec(sched, 4)
	if mutate != nil {
		mutate(&spec)
	}
	job := map[string]any{
		"apiVersion": "batch/v1", "kind": "Job",
		"metadata": map[string]any{
			"name": fmt.Sprintf("%s-%s-%d", js.GetName(), rjob, i), "labels": labels,
			"ownerReferences": []any{pgrToMap(t, pgrControllerRef(js))},
		},
		"spec": map[string]any{
			"parallelism": 1, "completions": 1, "completionMode": "Indexed",
			"template": map[string]any{"metadata": map[string]any{"labels": labels}, "spec": pgrToMap(t, spec)},
		},
	}
	if _, err := controlPlane.Create(context.Background(), &unstructured.Unstructured{Object: job}, js.GetNamespace()); err != nil {
		t.Fatal(err)
	}
}

// TestPodGrouperJobSet: one PodGroup for the whole JobSet, pods made by the
// real Job controller; a scale-up raises min-member; deleting the JobSet
// collects the PodGroup.
func TestPodGrouperJobSet(t *testing.T) {
	ctx := context.Background()
	ns, sched := pgrTest(t, "pgr-jobset")

	js := pgrCreate(t, ns, pgrJobSet(t, "train", sched, 2))
	pgrCreateJobSetJob(t, js, "leader", 0, sched)
	pgrCreateJobSetJob(t, js, "workers", 0, sched)
	pgrCreateJobSetJob(t, js, "workers", 1, sched)

	pg := pgrWaitPodGroup(t, ns, "train", "minMember 3", func(pg *schedv1alpha1.PodGroup) bool { return pg.Spec.MinMember == 3 })
	if q := pg.Spec.MinResources["nvidia.com/gpu"]; q.Value() != 12 {
		t.Errorf("minResources nvidia.com/gpu = %s, want 12", q.String())
	}
	wantLabels := map[string]string{api.LabelWorkloadKind: "JobSet", api.LabelWorkloadName: "train", api.LabelDefinition: "jobset"}
	for k, v := range wantLabels {
		if pg.Labels[k] != v {
			t.Errorf("PodGroup label %s = %q, want %q", k, pg.Labels[k], v)
		}
	}
	if len(pg.OwnerReferences) != 1 || pg.OwnerReferences[0].UID != js.GetUID() || !ptr.Deref(pg.OwnerReferences[0].Controller, false) {
		t.Errorf("PodGroup owners = %+v, want the JobSet %s as controller", pg.OwnerReferences, js.GetUID())
	}
	sel := "jobset.sigs.k8s.io/jobset-name=train"
	pgrWaitPods(t, ns, sel, 3, "in PodGroup train", pgrInGroup("train"))

	// Scale: workers 2 → 3, and the operator's extra Job.
	patch := []byte(`[{"op":"replace","path":"/spec/replicatedJobs/1/replicas","value":3}]`)
	if _, err := controlPlane.Dynamic.Resource(pgrJobSetGVR).Namespace(ns).Patch(ctx, "train", types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	pgrWaitPodGroup(t, ns, "train", "minMember 4 after scale-up", func(pg *schedv1alpha1.PodGroup) bool {
		q := pg.Spec.MinResources["nvidia.com/gpu"]
		return pg.Spec.MinMember == 4 && q.Value() == 16
	})
	pgrCreateJobSetJob(t, js, "workers", 2, sched)
	pgrWaitPods(t, ns, sel, 4, "in PodGroup train", pgrInGroup("train"))

	// Scale down without any pod event: min-member follows the workload.
	patch = []byte(`[{"op":"replace","path":"/spec/replicatedJobs/1/replicas","value":1}]`)
	if _, err := controlPlane.Dynamic.Resource(pgrJobSetGVR).Namespace(ns).Patch(ctx, "train", types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	pgrWaitPodGroup(t, ns, "train", "minMember 2 after scale-down", func(pg *schedv1alpha1.PodGroup) bool { return pg.Spec.MinMember == 2 })

	if names := podGroupNames(t, ns); len(names) != 1 {
		t.Fatalf("PodGroups in %s: %v, want exactly 1", ns, names)
	}

	// Delete the JobSet: the garbage collector takes the PodGroup along.
	if err := controlPlane.Dynamic.Resource(pgrJobSetGVR).Namespace(ns).Delete(ctx, "train", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "PodGroup train collected with its JobSet", objectGone(podGroups(t).SchedulingV1alpha1().PodGroups(ns), "train"))
}

// priorityClassOfTest creates PriorityClass name with value for t and
// deletes it when t ends (PriorityClasses are cluster-wide: name them
// after the test's namespace).
func priorityClassOfTest(t testing.TB, name string, value int32) {
	t.Helper()
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
	if _, err := controlPlane.Client.SchedulingV1().PriorityClasses().Create(context.Background(), pc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := controlPlane.Client.SchedulingV1().PriorityClasses().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
	})
}

// pgrPriorityIs is a PodGroup check: the gang priority annotations.
func pgrPriorityIs(value, class string) func(*schedv1alpha1.PodGroup) bool {
	return func(pg *schedv1alpha1.PodGroup) bool {
		v, ok := pg.Annotations[api.AnnotationPriority]
		return ok && v == value && pg.Annotations[api.AnnotationPriorityClass] == class
	}
}

// TestPodGrouperPriority (issue 15, item 4): the PodGroup carries the
// gang's priority, from real PriorityClasses resolved by the API server's
// Priority admission into the pods the real Job controller makes. A JobSet
// whose leader is high and whose workers are low is one gang with the
// highest priority, and a GangPriorityMixed Warning says so on the JobSet
// and on a low member; a uniform JobSet gets its class and no warning;
// when the high member's Job goes, the priority comes down.
func TestPodGrouperPriority(t *testing.T) {
	ctx := context.Background()
	ns, sched := pgrTest(t, "pgr-prio")
	high, low := ns+"-high", ns+"-low"
	priorityClassOfTest(t, high, 100000)
	priorityClassOfTest(t, low, 10)
	withClass := func(class string) func(*corev1.PodSpec) {
		return func(s *corev1.PodSpec) { s.PriorityClassName = class }
	}

	mixed := pgrCreate(t, ns, pgrJobSet(t, "mixed", sched, 2))
	pgrCreateJobSetJobWith(t, mixed, "leader", 0, sched, withClass(high))
	pgrCreateJobSetJobWith(t, mixed, "workers", 0, sched, withClass(low))
	pgrCreateJobSetJobWith(t, mixed, "workers", 1, sched, withClass(low))
	uniform := pgrCreate(t, ns, pgrJobSet(t, "uniform", sched, 1))
	pgrCreateJobSetJobWith(t, uniform, "leader", 0, sched, withClass(low))
	pgrCreateJobSetJobWith(t, uniform, "workers", 0, sched, withClass(low))

	pgrWaitPods(t, ns, "jobset.sigs.k8s.io/jobset-name=mixed", 3, "in PodGroup mixed", pgrInGroup("mixed"))
	pgrWaitPods(t, ns, "jobset.sigs.k8s.io/jobset-name=uniform", 2, "in PodGroup uniform", pgrInGroup("uniform"))
	pgrWaitPodGroup(t, ns, "mixed", "priority 100000 ("+high+")", pgrPriorityIs("100000", high))
	pgrWaitPodGroup(t, ns, "uniform", "priority 10 ("+low+")", pgrPriorityIs("10", low))
	// Every member is grouped and the PodGroup is written before each
	// member's label: the value holds once all members are labelled.
	holdsFor(t, 2*time.Second, "PodGroup mixed keeps the highest priority", objectIs(podGroups(t).SchedulingV1alpha1().PodGroups(ns), "mixed", func(pg *schedv1alpha1.PodGroup) (bool, string) {
		return pgrPriorityIs("100000", high)(pg), fmt.Sprint(pg.Annotations)
	}))

	want := []string{"gang mixed", "100000 (" + high + ")", "10 (" + low + ")", "the highest, 100000"}
	waitEvent(t, ns, "JobSet", "mixed", "GangPriorityMixed", want)
	waitEvent(t, ns, "Pod", "", "GangPriorityMixed", want)
	evs, err := controlPlane.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		if e.Reason != "GangPriorityMixed" {
			continue
		}
		if e.Regarding.Name == "uniform" || strings.HasPrefix(e.Regarding.Name, "uniform-") || strings.HasPrefix(e.Regarding.Name, "mixed-leader-") {
			t.Errorf("GangPriorityMixed on %s %s, which is uniform or the highest member: %s", e.Regarding.Kind, e.Regarding.Name, e.Note)
		}
	}

	// The high member's Job goes (with its pod): the gang is all low now.
	if err := controlPlane.Client.BatchV1().Jobs(ns).Delete(ctx, "mixed-leader-0", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
		t.Fatal(err)
	}
	pgrWaitPodGroup(t, ns, "mixed", "priority 10 ("+low+") once the high member is gone", pgrPriorityIs("10", low))
}

// TestPodGrouperLeaderWorkerSet: a stand-in for the LWS operator creates
// what it creates — a leader StatefulSet owned by the LWS, and per leader pod
// a worker StatefulSet owned by that leader pod — and labels the pods as its
// pod webhook does. One PodGroup per group, min-member = size.
func TestPodGrouperLeaderWorkerSet(t *testing.T) {
	ctx := context.Background()
	ns, sched := pgrTest(t, "pgr-lws")
	const groups, size = 2, 3
	tmpl := map[string]any{"spec": pgrToMap(t, pgrGPUPodSpec(sched, 2))}
	lws, err := controlPlane.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
		"metadata": map[string]any{"name": "serve"},
		"spec": map[string]any{
			"replicas":             groups,
			"leaderWorkerTemplate": map[string]any{"size": size, "workerTemplate": tmpl},
		},
	}}, ns)
	if err != nil {
		t.Fatal(err)
	}
	const nameLabel = "leaderworkerset.sigs.k8s.io/name"
	sts := func(name string, owner metav1.OwnerReference, replicas int, labels map[string]string) {
		spec := pgrGPUPodSpec(sched, 2)
		spec.RestartPolicy = corev1.RestartPolicyAlways
		obj := map[string]any{
			"apiVersion": "apps/v1", "kind": "StatefulSet",
			"metadata": map[string]any{"name": name, "labels": labels, "ownerReferences": []any{pgrToMap(t, owner)}},
			"spec": map[string]any{
				"replicas": replicas, "podManagementPolicy": "Parallel", "serviceName": "serve",
				"selector": map[string]any{"matchLabels": labels},
				"template": map[string]any{"metadata": map[string]any{"labels": labels}, "spec": pgrToMap(t, spec)},
			},
		}
		if _, err := controlPlane.Create(ctx, &unstructured.Unstructured{Object: obj}, ns); err != nil {
			t.Fatal(err)
		}
	}
	// The LWS pod webhook labels each pod at creation; the stand-in patches.
	label := func(pod string, labels map[string]string) {
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := controlPlane.Client.CoreV1().Pods(ns).Patch(ctx, pod, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	sts("serve", pgrControllerRef(lws), groups, map[string]string{nameLabel: "serve", "role": "leader"})
	leaders, err := controlPlane.WaitPodCount(ctx, ns, "role=leader", groups, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, leader := range leaders {
		g := strings.TrimPrefix(leader.Name, "serve-")
		label(leader.Name, map[string]string{"leaderworkerset.sigs.k8s.io/group-index": g, "leaderworkerset.sigs.k8s.io/worker-index": "0"})
		ref := metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: leader.Name, UID: leader.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
		sts("serve-"+g, ref, size-1, map[string]string{nameLabel: "serve", "role": "worker", "group": g})
	}
	for g := range groups {
		workers, err := controlPlane.WaitPodCount(ctx, ns, fmt.Sprintf("role=worker,group=%d", g), size-1, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range workers {
			idx, err := strconv.Atoi(w.Name[strings.LastIndex(w.Name, "-")+1:])
			if err != nil {
				t.Fatalf("worker pod %s: no ordinal: %v", w.Name, err)
			}
			label(w.Name, map[string]string{"leaderworkerset.sigs.k8s.io/group-index": fmt.Sprint(g), "leaderworkerset.sigs.k8s.io/worker-index": fmt.Sprint(idx + 1)})
		}
	}
	var names []string
	for g := range groups {
		name := fmt.Sprintf("serve-group-%d", g)
		names = append(names, name)
		pg := pgrWaitPodGroup(t, ns, name, fmt.Sprintf("minMember %d", size), func(pg *schedv1alpha1.PodGroup) bool { return pg.Spec.MinMember == size })
		if q := pg.Spec.MinResources["nvidia.com/gpu"]; q.Value() != 2*size {
			t.Errorf("PodGroup %s minResources nvidia.com/gpu = %s, want %d", name, q.String(), 2*size)
		}
		pgrWaitPods(t, ns, fmt.Sprintf("leaderworkerset.sigs.k8s.io/group-index=%d", g), size, "in "+name, pgrInGroup(name))
	}
	if got := podGroupNames(t, ns); strings.Join(got, ",") != strings.Join(names, ",") {
		t.Errorf("PodGroups = %v, want %v", got, names)
	}
}

// pgrTrainingRunKarta defines acme.example.com/v1 TrainingRun, a kind no
// catalog knows: workers are pods owned by the run, all in one gang.
const pgrTrainingRunKarta = `
apiVersion: run.ai/v1alpha1
kind: Karta
metadata:
  name: pgr-e2e-trainingrun
spec:
  structureDefinition:
    rootComponent:
      name: trainingrun
      kind: {group: acme.example.com, version: v1, kind: TrainingRun}
    childComponents:
    - name: worker
      ownerRef: trainingrun
      kind: {group: "", version: v1, kind: Pod}
      specDefinition:
        podTemplateSpecPath: .spec.template
      scaleDefinition:
        replicasPath: .spec.workers
      podSelector:
        componentTypeSelector:
          keyPath: '.metadata.labels["acme.example.com/role"]'
          value: worker
  optimizationInstructions:
    gangScheduling:
      podGroups:
      - name: trainingrun
        members:
        - componentName: worker
`

// pgrBrokenKarta has an assignment in a path: it must be reported Invalid
// with the field path and never stop the other definitions.
const pgrBrokenKarta = `
apiVersion: run.ai/v1alpha1
kind: Karta
metadata:
  name: pgr-e2e-broken
spec:
  structureDefinition:
    rootComponent:
      name: broken
      kind: {group: acme.example.com, version: v1, kind: BrokenRun}
    childComponents:
    - name: worker
      ownerRef: broken
      kind: {group: "", version: v1, kind: Pod}
      specDefinition:
        podTemplateSpecPath: .spec.template
      scaleDefinition:
        replicasPath: .spec.workers |= 2
`

func pgrApplyKarta(t *testing.T, doc string) {
	t.Helper()
	objs, err := controlPlane.Apply(context.Background(), []byte(doc), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		name := o.GetName()
		t.Cleanup(func() {
			err := controlPlane.Dynamic.Resource(podgrouper.KartaResource).Delete(context.Background(), name, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting Karta %s: %v", name, err)
			}
		})
	}
}

func pgrWaitKartaValid(t *testing.T, name, status, msgPart string) {
	t.Helper()
	karta := dynamicGetter(controlPlane.Dynamic.Resource(podgrouper.KartaResource))
	waitFor(t, time.Minute, fmt.Sprintf("Karta %s Valid=%s", name, status), objectIs(karta, name, func(u *unstructured.Unstructured) (bool, string) {
		// Missing or mistyped status fields read as empty: not valid yet.
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == podgrouper.ConditionValid {
				msg, _ := m["message"].(string)
				return m["status"] == status && strings.Contains(msg, msgPart), fmt.Sprintf("%v", m)
			}
		}
		return false, "no Valid condition"
	}))
}

// TestPodGrouperKarta: a kind no catalog knows is gang-scheduled once a
// Karta for it is applied, without a restart; a broken Karta is reported on
// its status and the others keep working.
func TestPodGrouperKarta(t *testing.T) {
	ctx := context.Background()
	ns, sched := pgrTest(t, "pgr-karta")

	spec := pgrGPUPodSpec(sched, 1)
	run, err := controlPlane.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "acme.example.com/v1", "kind": "TrainingRun",
		"metadata": map[string]any{"name": "run1"},
		"spec":     map[string]any{"workers": 2, "template": map[string]any{"spec": pgrToMap(t, spec)}},
	}}, ns)
	if err != nil {
		t.Fatal(err)
	}
	mkPod := func(name string) {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"acme.example.com/role": "worker", "run": "run1"},
				OwnerReferences: []metav1.OwnerReference{pgrControllerRef(run)}},
			Spec: spec,
		}
		if _, err := controlPlane.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mkPod("run1-worker-0")
	mkPod("run1-worker-1")
	// No definition for TrainingRun yet: the pods fall back to the
	// catalog's definition of a bare Pod, which has no gang.
	pgrWaitPods(t, ns, "run=run1", 2, "scheduled alone", pgrAlone("definition pod has no gang instruction"))

	pgrApplyKarta(t, pgrTrainingRunKarta)
	pgrWaitKartaValid(t, "pgr-e2e-trainingrun", "True", "")
	pg := pgrWaitPodGroup(t, ns, "run1", "minMember 2", func(pg *schedv1alpha1.PodGroup) bool { return pg.Spec.MinMember == 2 })
	if pg.Labels[api.LabelDefinition] != "pgr-e2e-trainingrun" {
		t.Errorf("PodGroup definition label = %q, want pgr-e2e-trainingrun", pg.Labels[api.LabelDefinition])
	}
	pgrWaitPods(t, ns, "run=run1", 2, "in PodGroup run1", pgrInGroup("run1"))

	pgrApplyKarta(t, pgrBrokenKarta)
	pgrWaitKartaValid(t, "pgr-e2e-broken", "False", "spec.structureDefinition.childComponents[0].scaleDefinition.replicasPath")
	pgrWaitKartaValid(t, "pgr-e2e-trainingrun", "True", "")
	// The good definition still groups new pods.
	mkPod("run1-worker-2")
	pgrWaitPods(t, ns, "run=run1", 3, "in PodGroup run1", pgrInGroup("run1"))
}

// TestPodGrouperYields: a pod already in another gang mechanism is left
// untouched (no label, no annotation, no PodGroup write), with an event.
func TestPodGrouperYields(t *testing.T) {
	ctx := context.Background()
	ns, sched := pgrTest(t, "pgr-yield")

	js := pgrCreate(t, ns, pgrJobSet(t, "yjs", sched, 1))
	theirs, err := podGroups(t).SchedulingV1alpha1().PodGroups(ns).Create(ctx, &schedv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "theirs"}, Spec: schedv1alpha1.PodGroupSpec{MinMember: 7},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	type marked struct {
		name string
		mut  func(*corev1.Pod)
	}
	cases := []marked{
		{"control", func(*corev1.Pod) {}},
		{"native", func(p *corev1.Pod) {
			p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("native-group")}
		}},
		{"operator-label", func(p *corev1.Pod) { p.Labels[api.LabelPodGroup] = "theirs" }},
		{"volcano", func(p *corev1.Pod) { p.Annotations = map[string]string{"scheduling.k8s.io/group-name": "vc-group"} }},
		{"kai", func(p *corev1.Pod) { p.Annotations = map[string]string{"pod-group-name": "kai-group"} }},
	}
	created := map[string]*corev1.Pod{}
	for _, c := range cases {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "yjs-" + c.name, Labels: map[string]string{
				"jobset.sigs.k8s.io/jobset-name": "yjs", "jobset.sigs.k8s.io/replicatedjob-name": "leader", "jobset.sigs.k8s.io/job-index": "0",
			}, OwnerReferences: []metav1.OwnerReference{pgrControllerRef(js)}},
			Spec: pgrGPUPodSpec(sched, 4),
		}
		c.mut(p)
		got, err := controlPlane.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("pod %s: %v", p.Name, err)
		}
		if c.name == "native" && got.Spec.SchedulingGroup == nil {
			t.Fatal("the API server dropped spec.schedulingGroup; is the GenericWorkload feature gate on?")
		}
		created[c.name] = got
	}
	// The control pod proves the pod-grouper processed the namespace.
	pgrWaitPodGroup(t, ns, "yjs", "created for the control pod", func(*schedv1alpha1.PodGroup) bool { return true })
	err = localcluster.WaitFor(ctx, time.Minute, "control pod labelled and one yield event per marked pod", func(ctx context.Context) (bool, string, error) {
		p, err := controlPlane.Client.CoreV1().Pods(ns).Get(ctx, "yjs-control", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		evs, err := controlPlane.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=GangManagedElsewhere"})
		if err != nil {
			return false, "", err
		}
		got := map[string]bool{}
		for _, e := range evs.Items {
			got[e.InvolvedObject.Name] = true
		}
		return p.Labels[api.LabelPodGroup] == "yjs" && len(got) == len(cases)-1, fmt.Sprintf("label %q, events for %v", p.Labels[api.LabelPodGroup], got), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases[1:] {
		p, err := controlPlane.Client.CoreV1().Pods(ns).Get(ctx, "yjs-"+c.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.ResourceVersion != created[c.name].ResourceVersion {
			t.Errorf("pod %s was written: labels %v annotations %v", p.Name, p.Labels, p.Annotations)
		}
	}
	pg, err := podGroups(t).SchedulingV1alpha1().PodGroups(ns).Get(ctx, "theirs", metav1.GetOptions{})
	if err != nil || pg.ResourceVersion != theirs.ResourceVersion {
		t.Errorf("the operator's PodGroup was written (err %v)", err)
	}
}

// TestPodGrouperRestart: the pod-grouper is stopped mid-stream and a new one
// started; the objects converge to the same state, without duplicates.
func TestPodGrouperRestart(t *testing.T) {
	ctx := context.Background()
	ns := testNamespace(t, "pgr-restart")
	sched := "pgr-" + ns
	first := startPodGrouper(t, sched)
	js := pgrCreate(t, ns, pgrJobSet(t, "rs", sched, 2))
	pgrCreateJobSetJob(t, js, "leader", 0, sched)
	pgrCreateJobSetJob(t, js, "workers", 0, sched)
	pgrCreateJobSetJob(t, js, "workers", 1, sched)
	first.stop()
	// While none runs: scale up and add the Job.
	patch := []byte(`[{"op":"replace","path":"/spec/replicatedJobs/1/replicas","value":3}]`)
	if _, err := controlPlane.Dynamic.Resource(pgrJobSetGVR).Namespace(ns).Patch(ctx, "rs", types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	pgrCreateJobSetJob(t, js, "workers", 2, sched)

	startPodGrouper(t, sched)
	pgrWaitPodGroup(t, ns, "rs", "minMember 4", func(pg *schedv1alpha1.PodGroup) bool { return pg.Spec.MinMember == 4 })
	pgrWaitPods(t, ns, "jobset.sigs.k8s.io/jobset-name=rs", 4, "in PodGroup rs", pgrInGroup("rs"))
	if names := podGroupNames(t, ns); len(names) != 1 {
		t.Fatalf("PodGroups after restart: %v, want 1", names)
	}
}

// pgrFixtureExpected is the part of catalog/testdata/<type>/expected.yaml
// the pod-grouper test reads.
type pgrFixtureExpected struct {
	Pods map[string]struct {
		Gang string `json:"gang"`
	} `json:"pods"`
	Gangs []struct {
		Definition   string            `json:"definition"`
		Keys         []string          `json:"keys"`
		MinMember    int32             `json:"minMember"`
		MinResources map[string]string `json:"minResources"`
	} `json:"gangs"`
}

// pgrControllerKinds are kinds a running kube-controller-manager controller
// would act on (create, adopt or delete pods of) if a fixture created them:
// fixtures with these as intermediate owners cannot replay the operator's
// pods exactly with this replay; TestCatalogFixturesWithControllers
// (catalog_replay_test.go) replays them next to the real controllers. Jobs are replayed with spec.managedBy,
// which the Job controller leaves alone.
var pgrControllerKinds = map[schema.GroupKind]bool{
	{Group: "apps", Kind: "Deployment"}:  true,
	{Group: "apps", Kind: "ReplicaSet"}:  true,
	{Group: "apps", Kind: "StatefulSet"}: true,
}

// TestPodGrouperCatalogFixtures replays every catalog fixture on the control
// plane: the workload object, the children and the pods, exactly as the
// fixture files give them (namespace and owner UIDs rewritten to the real
// ones as they are created), and checks the PodGroups and pod labels against
// the fixture's expected gangs.
func TestPodGrouperCatalogFixtures(t *testing.T) {
	root := pgrRepoRoot()
	dirs, err := filepath.Glob(filepath.Join(root, "catalog", "testdata", "*"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no catalog fixtures under %s (err %v)", root, err)
	}
	sched := "pgr-fixtures"
	startPodGrouper(t, sched)
	var replayed, excluded []string
	for _, dir := range dirs {
		name := filepath.Base(dir)
		f := catLoadFixture(t, name)
		if k := pgrUsesControllerKinds(append([]*unstructured.Unstructured{f.root}, f.children...)); k != "" {
			excluded = append(excluded, name+" ("+k+")")
			continue
		}
		replayed = append(replayed, name)
		t.Run(name, func(t *testing.T) {
			ns := testNamespace(t, "pgr-fx-"+name)
			pgrReplayFixture(t, ns, sched, f.root, f.children, f.pods)
			pgrCheckFixture(t, ns, name, f.root.GetName(), f.want)
		})
	}
	t.Logf("replaying %d fixtures: %v", len(replayed), replayed)
	t.Logf("not replayed here (built-in controllers act on their children): %v; TestCatalogFixturesWithControllers replays them", excluded)
	if len(replayed) < len(dirs)/2 {
		t.Errorf("only %d of %d fixtures replayed", len(replayed), len(dirs))
	}
}

func pgrUsesControllerKinds(objs []*unstructured.Unstructured) string {
	for _, o := range objs {
		if pgrControllerKinds[o.GroupVersionKind().GroupKind()] {
			return o.GetKind()
		}
	}
	return ""
}

// pgrReplayFixture creates root, then children and pods in owner order.
func pgrReplayFixture(t *testing.T, ns, sched string, root *unstructured.Unstructured, children, pods []*unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	uids := map[types.UID]types.UID{} // fixture UID → real UID
	byName := map[string]types.UID{}  // kind/name → real UID
	create := func(o *unstructured.Unstructured) (bool, error) {
		if _, done := byName[o.GetKind()+"/"+o.GetName()]; done {
			return true, nil // the root listed again (a bare Pod's fixture)
		}
		c, ok := fixtureCopy(o, ns, sched, func(r metav1.OwnerReference) (types.UID, bool) {
			real, ok := uids[r.UID]
			if !ok {
				real, ok = byName[r.Kind+"/"+r.Name]
			}
			return real, ok
		})
		if !ok {
			return false, nil // owner not created yet
		}
		if c.GroupVersionKind().GroupKind() == (schema.GroupKind{Group: "batch", Kind: "Job"}) {
			// children.yaml abbreviates intermediate objects: fill in what
			// the API requires of a Job's template.
			if cs, _, _ := unstructured.NestedSlice(c.Object, "spec", "template", "spec", "containers"); len(cs) == 0 {
				_ = unstructured.SetNestedSlice(c.Object, []any{map[string]any{"name": "main", "image": "busybox"}}, "spec", "template", "spec", "containers")
			}
			if rp, _, _ := unstructured.NestedString(c.Object, "spec", "template", "spec", "restartPolicy"); rp == "" {
				_ = unstructured.SetNestedField(c.Object, "Never", "spec", "template", "spec", "restartPolicy")
			}
		}
		created, err := controlPlane.Create(ctx, c, ns)
		if err != nil {
			return false, err
		}
		if o.GetUID() != "" {
			uids[o.GetUID()] = created.GetUID()
		}
		byName[created.GetKind()+"/"+created.GetName()] = created.GetUID()
		return true, nil
	}
	createInOwnerOrder(t, "", root, append(append([]*unstructured.Unstructured{}, children...), pods...), create)
}

// fixtureCopy is the fixture object o as a replay creates it in ns: owner
// UIDs rewritten to the real ones (false if realUID knows an owner not
// yet), what the API server sets removed, pods for sched and unbound, Jobs
// managed by someone else (the Job controller leaves them alone, so the
// fixture's pods are the only pods) and CronJobs suspended.
func fixtureCopy(o *unstructured.Unstructured, ns, sched string, realUID func(metav1.OwnerReference) (types.UID, bool)) (*unstructured.Unstructured, bool) {
	c := o.DeepCopy()
	refs := c.GetOwnerReferences()
	for i, r := range refs {
		real, ok := realUID(r)
		if !ok {
			return nil, false
		}
		refs[i].UID = real
	}
	c.SetOwnerReferences(refs)
	for _, f := range []string{"uid", "resourceVersion", "creationTimestamp", "generation", "managedFields", "selfLink"} {
		unstructured.RemoveNestedField(c.Object, "metadata", f)
	}
	unstructured.RemoveNestedField(c.Object, "status")
	c.SetNamespace(ns)
	switch c.GroupVersionKind().GroupKind() {
	case schema.GroupKind{Kind: "Pod"}:
		_ = unstructured.SetNestedField(c.Object, sched, "spec", "schedulerName")
		unstructured.RemoveNestedField(c.Object, "spec", "nodeName")
	case schema.GroupKind{Group: "batch", Kind: "Job"}:
		_ = unstructured.SetNestedField(c.Object, "muster.io/e2e-fixture", "spec", "managedBy")
		unstructured.RemoveNestedField(c.Object, "spec", "selector")
		unstructured.RemoveNestedField(c.Object, "spec", "manualSelector")
		for _, l := range []string{"controller-uid", "batch.kubernetes.io/controller-uid", "job-name", "batch.kubernetes.io/job-name"} {
			unstructured.RemoveNestedField(c.Object, "spec", "template", "metadata", "labels", l)
		}
	case schema.GroupKind{Group: "batch", Kind: "CronJob"}:
		_ = unstructured.SetNestedField(c.Object, true, "spec", "suspend")
	}
	return c, true
}

// createInOwnerOrder creates root, then the others in rounds: create
// reports false for an object whose owner does not exist yet, and the next
// round tries it again. A round that creates nothing fails t (the owners
// are in no fixture file), as does any error. fixture, if set, starts the
// messages.
func createInOwnerOrder(t testing.TB, fixture string, root *unstructured.Unstructured, others []*unstructured.Unstructured, create func(*unstructured.Unstructured) (bool, error)) {
	t.Helper()
	if fixture != "" {
		fixture += ": "
	}
	if ok, err := create(root); err != nil || !ok {
		t.Fatalf("%screating the root: created=%v err=%v", fixture, ok, err)
	}
	pending := others
	for len(pending) > 0 {
		var left []*unstructured.Unstructured
		for _, o := range pending {
			ok, err := create(o)
			if apierrors.IsInvalid(err) {
				// A real operator CRD (installed by operators_test.go)
				// validates the fixture's objects: an abbreviated one is a
				// fixture bug, not a reason to skip.
				t.Fatalf("%s%s %s is not valid under the installed CRD: %v", fixture, o.GetKind(), o.GetName(), err)
			}
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				left = append(left, o)
			}
		}
		if len(left) == len(pending) {
			var names []string
			for _, o := range left {
				names = append(names, o.GetKind()+"/"+o.GetName())
			}
			t.Fatalf("%sowners of %v are in no fixture file", fixture, names)
		}
		pending = left
	}
}

// pgrCheckFixture waits until every fixture pod is decided as expected:
// pods of one expected gang share one PodGroup, pods of different gangs
// different ones, gang-free pods are marked; then compares the PodGroups.
func pgrCheckFixture(t *testing.T, ns, defName, workload string, want pgrFixtureExpected) {
	t.Helper()
	ctx := context.Background()
	var labels map[string]string // pod → PodGroup label
	err := localcluster.WaitFor(ctx, time.Minute, "fixture pods grouped as expected.yaml says", func(ctx context.Context) (bool, string, error) {
		labels = map[string]string{}
		var bad []string
		for podName, exp := range want.Pods {
			p, err := controlPlane.Client.CoreV1().Pods(ns).Get(ctx, podName, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			l := p.Labels[api.LabelPodGroup]
			labels[podName] = l
			switch {
			case exp.Gang == "" && (l != "" || p.Annotations[api.AnnotationGrouping] != api.GroupingNone):
				bad = append(bad, fmt.Sprintf("%s: want alone, label %q annotations %v", podName, l, p.Annotations))
			case exp.Gang != "" && (l == "" || api.ScheduledAlone(p.Annotations)):
				bad = append(bad, fmt.Sprintf("%s: want gang %s, label %q annotations %v", podName, exp.Gang, l, p.Annotations))
			}
		}
		sort.Strings(bad)
		return len(bad) == 0, strings.Join(bad, "; "), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Expected gang id ↔ PodGroup name must be a bijection.
	gangToPG := map[string]string{}
	pgToGang := map[string]string{}
	for podName, exp := range want.Pods {
		if exp.Gang == "" {
			continue
		}
		pg := labels[podName]
		if prev, ok := gangToPG[exp.Gang]; ok && prev != pg {
			t.Errorf("gang %s split over PodGroups %s and %s", exp.Gang, prev, pg)
		}
		if prev, ok := pgToGang[pg]; ok && prev != exp.Gang {
			t.Errorf("PodGroup %s holds gangs %s and %s", pg, prev, exp.Gang)
		}
		gangToPG[exp.Gang], pgToGang[pg] = pg, exp.Gang
	}
	if names := podGroupNames(t, ns); len(names) != len(gangToPG) {
		t.Errorf("PodGroups %v, want %d (one per gang of the pods)", names, len(gangToPG))
	}
	for _, g := range want.Gangs {
		id := strings.Join(append([]string{g.Definition}, g.Keys...), "/")
		name, ok := gangToPG[id]
		if !ok {
			continue // a gang of expected.yaml without pods in pods.yaml
		}
		pg, err := podGroups(t).SchedulingV1alpha1().PodGroups(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("gang %s: PodGroup %s: %v", id, name, err)
			continue
		}
		if pg.Spec.MinMember != g.MinMember {
			t.Errorf("gang %s: PodGroup %s minMember %d, want %d", id, name, pg.Spec.MinMember, g.MinMember)
		}
		for r, q := range g.MinResources {
			got := pg.Spec.MinResources[corev1.ResourceName(r)]
			if wq := resource.MustParse(q); got.Cmp(wq) != 0 {
				t.Errorf("gang %s: PodGroup %s minResources[%s] = %s, want %s", id, name, r, got.String(), q)
			}
		}
		if pg.Labels[api.LabelDefinition] != defName || pg.Labels[api.LabelWorkloadName] != workload {
			t.Errorf("gang %s: PodGroup %s labels %v, want definition %s and workload %s", id, name, pg.Labels, defName, workload)
		}
		if len(name) > 63 || !strings.HasPrefix(name, workload) {
			t.Errorf("gang %s: PodGroup name %q: want at most 63 characters starting with the workload name", id, name)
		}
	}
}

// BenchmarkPodGrouperLatency measures pod create → PodGroup written and pod
// labelled, at 500 pods/s: 250 JobSet-shaped gangs of 8 pods (one Job of
// parallelism 8 each, replayed with spec.managedBy so the test creates the
// pods at the chosen rate). The end is when a watch has seen both the
// pod's label and its PodGroup, whichever came later, so the number keeps
// its meaning whatever order the pod-grouper writes them in. Reports
// p10, p50 and p99 in milliseconds, and the creation rate reached (the
// target is 500/s; a loaded machine sends fewer).
func BenchmarkPodGrouperLatency(b *testing.B) {
	b.Logf("pod-grouper workers: %d, target rate %d pods/s", pgrBenchWorkers, pgrBenchRate)
	const (
		gangs   = 250
		perGang = 8
	)
	rate := pgrBenchRate
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		ns := testNamespace(b, "pgr-bench")
		sched := "pgr-" + ns
		writes := newWriteCounter()
		cfg := rest.CopyConfig(controlPlane.RestConfig)
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &countingTransport{next: rt, c: writes} })
		// MUSTER_BENCH_PODGROUPER_NULL=1 replaces the pod-grouper with the
		// least any labeller must do (see startNullLabeller): the path's
		// floor on this machine, to tell the pod-grouper's share of the
		// latency from the API server's.
		// MUSTER_BENCH_PODGROUPER_BINARY=1 runs the shipped binary
		// (MUSTER_BENCH_BIN, else a fresh build) in its own process, as a
		// Deployment does, instead of in the process that hosts the API
		// server: there its workers pay for the collection of that
		// process's whole heap. Its writes are then not counted.
		null := os.Getenv("MUSTER_BENCH_PODGROUPER_NULL") == "1"
		binary := os.Getenv("MUSTER_BENCH_PODGROUPER_BINARY") == "1"
		switch {
		case null:
			startNullLabeller(b, cfg, ns, pgrBenchWorkers)
		case binary:
			addr := fmt.Sprintf("127.0.0.1:%d", freePort(b))
			startBinary(b, filepath.Join(memBinaries(b), "muster-podgrouper"), "--kubeconfig", controlPlane.KubeconfigPath,
				"--scheduler-name", sched, "--leader-elect=false", "--bind-address", addr, "--workers", strconv.Itoa(pgrBenchWorkers),
				"--kube-api-qps", "1000", "--kube-api-burst", "2000")
			waitPodGrouperReady(ctx, b, addr)
		default:
			startPodGrouperWithConfig(b, cfg, sched, pgrBenchWorkers)
		}

		// Workloads first, outside the measurement.
		jobs := make([]*unstructured.Unstructured, gangs)
		for g := range gangs {
			job, err := pgrBenchGang(ctx, b, ns, sched, g, perGang)
			if err != nil {
				b.Fatal(err)
			}
			jobs[g] = job
		}

		// Watch for the labels before creating pods (an informer: it
		// re-lists and re-watches on its own if the watch is closed).
		created := make(map[string]time.Time, gangs*perGang)
		var mu sync.Mutex
		doneWatching := make(chan struct{})
		// The clock starts when the create call returns (the pod exists in
		// the API), so the API server's own create latency under load is
		// not counted, and stops when the pod is labelled and its
		// PodGroup exists, whichever is later; what is seen before the
		// create returns counts as 0.
		// The null labeller writes no PodGroup: its label alone counts.
		labelledAt := map[string]time.Time{}
		labelOf := map[string]string{}
		pgAt := map[string]time.Time{}
		membersOf := map[string][]string{}
		latencyOf := make(map[string]time.Duration, gangs*perGang)
		record := func(name string) {
			start, ok1 := created[name]
			end, ok2 := labelledAt[name]
			pgSeen, ok3 := pgAt[labelOf[name]]
			if _, seen := latencyOf[name]; !ok1 || !ok2 || (!ok3 && !null) || seen {
				return
			}
			latencyOf[name] = max(end.Sub(start), pgSeen.Sub(start), 0)
			if len(latencyOf) == gangs*perGang {
				close(doneWatching)
			}
		}
		observe := func(obj any) {
			p, ok := obj.(*corev1.Pod)
			if !ok || p.Labels[api.LabelPodGroup] == "" {
				return
			}
			now := time.Now()
			mu.Lock()
			defer mu.Unlock()
			if _, ok := labelledAt[p.Name]; !ok {
				labelledAt[p.Name] = now
				labelOf[p.Name] = p.Labels[api.LabelPodGroup]
				membersOf[labelOf[p.Name]] = append(membersOf[labelOf[p.Name]], p.Name)
			}
			record(p.Name)
		}
		observePG := func(obj any) {
			pg, ok := obj.(*schedv1alpha1.PodGroup)
			if !ok {
				return
			}
			now := time.Now()
			mu.Lock()
			defer mu.Unlock()
			if _, ok := pgAt[pg.Name]; !ok {
				pgAt[pg.Name] = now
			}
			for _, name := range membersOf[pg.Name] {
				record(name)
			}
		}
		wctx, stopWatch := context.WithCancel(ctx)
		factory := informers.NewSharedInformerFactoryWithOptions(controlPlane.Client, 0, informers.WithNamespace(ns))
		if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    observe,
			UpdateFunc: func(_, n any) { observe(n) },
		}); err != nil {
			b.Fatal(err)
		}
		pgFactory := pginformers.NewSharedInformerFactoryWithOptions(podGroups(b), 0, pginformers.WithNamespace(ns))
		if _, err := pgFactory.Scheduling().V1alpha1().PodGroups().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: observePG,
		}); err != nil {
			b.Fatal(err)
		}
		factory.Start(wctx.Done())
		pgFactory.Start(wctx.Done())
		factory.WaitForCacheSync(wctx.Done())
		pgFactory.WaitForCacheSync(wctx.Done())

		b.ResetTimer()
		writes.start()
		begin := time.Now()
		tick := time.NewTicker(time.Second / time.Duration(rate))
		sem := make(chan struct{}, 32)
		errs := make(chan error, gangs*perGang)
		for g := range gangs {
			for k := range perGang {
				<-tick.C
				name := fmt.Sprintf("g%d-workers-0-%d", g, k)
				p := &corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
						"jobset.sigs.k8s.io/jobset-name": fmt.Sprintf("g%d", g), "jobset.sigs.k8s.io/replicatedjob-name": "workers", "jobset.sigs.k8s.io/job-index": "0",
					}, OwnerReferences: []metav1.OwnerReference{pgrControllerRef(jobs[g])}},
					Spec: pgrGPUPodSpec(sched, 1),
				}
				sem <- struct{}{}
				go func() {
					defer func() { <-sem }()
					if _, err := controlPlane.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
						errs <- err
						return
					}
					mu.Lock()
					created[name] = time.Now()
					record(name)
					mu.Unlock()
				}()
			}
		}
		tick.Stop()
		sent := time.Since(begin)
		select {
		case <-doneWatching:
		case err := <-errs:
			b.Fatal(err)
		case <-time.After(5 * time.Minute):
			mu.Lock()
			n := len(latencyOf)
			mu.Unlock()
			b.Fatalf("only %d of %d pods labelled", n, gangs*perGang)
		}
		stopWatch()
		factory.Shutdown()
		pgFactory.Shutdown()
		b.StopTimer()
		counts, total := writes.stop()
		b.Logf("pod-grouper writes: %.2f per pod (%s)", float64(total)/float64(gangs*perGang), formatWrites(counts))
		latencies := slices.Sorted(maps.Values(latencyOf))
		q := func(f float64) float64 {
			return float64(latencies[int(f*float64(len(latencies)-1))].Microseconds()) / 1000
		}
		// The process start anchors GODEBUG=gctrace=1's "@<seconds>s".
		b.Logf("slowest 1%% (the measurement began %.3f s after the process started): %s",
			begin.Sub(processStart).Seconds(), pgrTail(latencyOf, created, begin, len(latencies)/100))
		b.ReportMetric(q(0.1), "p10-ms")
		b.ReportMetric(q(0.5), "p50-ms")
		b.ReportMetric(q(0.99), "p99-ms")
		b.ReportMetric(float64(len(latencies))/sent.Seconds(), "pods/s-sent")
		if names := podGroupNames(b, ns); !null && len(names) != gangs {
			b.Errorf("%d PodGroups, want %d", len(names), gangs)
		}
	}
}

// startNullLabeller labels every new pod of ns with the PodGroup label of
// its gang (from the benchmark's "jobset-name" label), from an informer,
// with one merge patch per pod on workers goroutines: no owner lookup, no
// definition, no PodGroup. It stops when tb ends.
func startNullLabeller(tb testing.TB, cfg *rest.Config, ns string, workers int) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	work := make(chan *corev1.Pod, 4096)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case p := <-work:
					patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, api.LabelPodGroup, p.Labels["jobset.sigs.k8s.io/jobset-name"])
					if _, err := cs.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil && ctx.Err() == nil {
						tb.Errorf("null labeller: %v", err)
					}
				}
			}
		})
	}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if p, ok := obj.(*corev1.Pod); ok && p.Labels[api.LabelPodGroup] == "" {
				select {
				case work <- p:
				case <-ctx.Done():
				}
			}
		},
	}); err != nil {
		tb.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	tb.Cleanup(func() {
		cancel()
		factory.Shutdown()
		wg.Wait()
	})
}

// processStart is when the test binary started (package initialisation).
var processStart = time.Now()

// pgrTail describes the n slowest pods: latency, when the create returned
// (seconds since begin) and the pod's place in its gang (0 is the member
// whose PodGroup the pod-grouper creates). Whether the tail is clustered in
// time or sits on first members tells a pause of the process from the cost
// of the PodGroup create.
func pgrTail(latency map[string]time.Duration, created map[string]time.Time, begin time.Time, n int) string {
	names := slices.Collect(maps.Keys(latency))
	slices.SortFunc(names, func(a, b string) int { return cmp.Compare(latency[b], latency[a]) })
	var sb strings.Builder
	for _, name := range names[:min(n, len(names))] {
		fmt.Fprintf(&sb, "\n  %s %.1f ms at %.2f s", name, float64(latency[name].Microseconds())/1000, created[name].Sub(begin).Seconds())
	}
	return sb.String()
}

// pgrBenchGang creates the JobSet g<g> of one Job g<g>-workers-0 of
// perGang pods with 1 GPU each for sched; the Job is managed by someone
// else, so the benchmark creates the pods itself. It returns the Job.
func pgrBenchGang(ctx context.Context, tb testing.TB, ns, sched string, g, perGang int) (*unstructured.Unstructured, error) {
	template := map[string]any{"spec": pgrToMap(tb, pgrGPUPodSpec(sched, 1))}
	js, err := controlPlane.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
		"metadata": map[string]any{"name": fmt.Sprintf("g%d", g)},
		"spec": map[string]any{"replicatedJobs": []any{map[string]any{
			"name": "workers", "replicas": 1,
			"template": map[string]any{"spec": map[string]any{"parallelism": perGang, "completions": perGang, "template": template}},
		}}},
	}}, ns)
	if err != nil {
		return nil, err
	}
	return controlPlane.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "batch/v1", "kind": "Job",
		"metadata": map[string]any{"name": fmt.Sprintf("g%d-workers-0", g), "ownerReferences": []any{pgrToMap(tb, pgrControllerRef(js))}},
		"spec":     map[string]any{"parallelism": perGang, "completions": perGang, "managedBy": "muster.io/e2e-bench", "template": template},
	}}, ns)
}

// TestPodGrouperCommand runs the shipped command (cmd/muster-podgrouper/app)
// against the control plane: it takes its own lease, serves /healthz,
// /readyz and /metrics, and groups pods.
func TestPodGrouperCommand(t *testing.T) {
	ns := testNamespace(t, "pgr-cmd")
	sched := "pgr-" + ns
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))

	o := app.NewOptions()
	o.Kubeconfig = controlPlane.KubeconfigPath
	o.SchedulerNames = []string{sched}
	o.BindAddress = addr
	o.LeaderElection.ResourceNamespace = ns
	o.LeaderElection.ResourceName = "muster-podgrouper"
	o.LeaderElection.RetryPeriod = metav1.Duration{Duration: 200 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, o) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("muster-podgrouper: %v", err)
		}
	})

	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if err := localcluster.WaitFor(ctx, time.Minute, "/readyz OK", func(context.Context) (bool, string, error) {
		code, body := get("/readyz")
		return code == http.StatusOK, fmt.Sprintf("%d %s", code, body), nil
	}); err != nil {
		t.Fatal(err)
	}
	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz = %d", code)
	}
	lease, err := controlPlane.Client.CoordinationV1().Leases(ns).Get(ctx, "muster-podgrouper", metav1.GetOptions{})
	if err != nil || ptr.Deref(lease.Spec.HolderIdentity, "") == "" {
		t.Errorf("lease %s/muster-podgrouper: %v, holder %v", ns, err, lease)
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "solo", Labels: map[string]string{"app": "solo"}}, Spec: pgrGPUPodSpec(sched, 0)}
	if _, err := controlPlane.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pgrWaitPods(t, ns, "app=solo", 1, "scheduled alone", pgrAlone("definition pod has no gang instruction"))
	_, metrics := get("/metrics")
	for _, m := range []string{"muster_podgrouper_reconcile_duration_seconds", "muster_podgrouper_errors_total", "muster_podgrouper_pod_to_podgroup_seconds"} {
		if !strings.Contains(metrics, m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}
}

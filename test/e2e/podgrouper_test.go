package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

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

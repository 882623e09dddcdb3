package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/muster-io/muster/api"
	podgrouperapp "github.com/muster-io/muster/cmd/muster-podgrouper/app"
	sandboxapp "github.com/muster-io/muster/cmd/muster-sandbox/app"
	"github.com/muster-io/muster/localcluster"
)

// nativeRig is native mode for one test, wired as the sandbox wires it
// (sandboxapp.NativeWebhook, sandboxapp.NativePodGrouper) but scoped to the
// test: the webhook configuration selects only its namespace, the
// pod-grouper serves only its schedulers and has its own lease, Secret and
// configuration, so tests in the shared control plane do not meet.
type nativeRig struct {
	ns, webhook string
	port        int
	schedulers  []string // muster-scheduler names of the pod-grouper
	native      []string // native-only scheduler names
}

func newNativeRig(t testing.TB, ns string, schedulers, native []string) *nativeRig {
	t.Helper()
	port, err := localcluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	if err := sandboxapp.OptInNative(context.Background(), controlPlane, ns); err != nil {
		t.Fatal(err)
	}
	return &nativeRig{ns: ns, webhook: "muster-podgrouper-" + ns, port: port, schedulers: schedulers, native: native}
}

// configure creates the test's webhook configuration (deleted when t
// ends). From then on every pod create in the namespace needs the webhook.
func (r *nativeRig) configure(t testing.TB) {
	t.Helper()
	mwc := sandboxapp.NativeWebhook(r.port)
	mwc.Name = r.webhook
	mwc.Webhooks[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] = r.ns
	adm := controlPlane.Client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	if _, err := adm.Create(context.Background(), mwc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := adm.Delete(context.Background(), r.webhook, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting webhook configuration %s: %v", r.webhook, err)
		}
	})
}

// start runs the pod-grouper in native mode (or, with native false, in
// scheduler-plugins mode with the webhook off); stop stops it.
func (r *nativeRig) start(t testing.TB, native bool) (stop func()) {
	t.Helper()
	if err := createNamespaceIfMissing(sandboxapp.NativeSystemNamespace); err != nil {
		t.Fatal(err)
	}
	stop, err := sandboxapp.NativePodGrouper(context.Background(), controlPlane, r.port, func(o *podgrouperapp.Options) {
		o.SchedulerNames = r.schedulers
		o.NativeSchedulerNames = r.native
		o.WebhookSecret = sandboxapp.NativeSystemNamespace + "/" + r.webhook
		o.WebhookConfiguration = r.webhook
		o.LeaderElection.ResourceName = r.webhook
		if !native {
			o.PodGroupAPI = podgrouperapp.PodGroupAPISchedulerPlugins
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	if native {
		r.waitWebhook(t)
	}
	return stop
}

// waitWebhook waits until the API server calls the webhook with the CA the
// pod-grouper injected: a dry-run pod create comes back joined.
func (r *nativeRig) waitWebhook(t testing.TB) {
	t.Helper()
	if err := sandboxapp.WaitNativeWebhook(context.Background(), controlPlane, r.ns, time.Minute); err != nil {
		t.Fatal(err)
	}
}

func createNamespaceIfMissing(ns string) error {
	_, err := controlPlane.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// nativeJob is a Job of n one-GPU pods ganged by annotation, on the pool's
// nodes, for scheduler sched.
func nativeJob(name, pool, sched string, n int32) *batchv1.Job {
	sel, tol := localcluster.PoolPlacement(pool)
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{api.AnnotationMinMember: fmt.Sprint(n)}},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To(n), Completions: ptr.To(n),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"job": name}},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever, SchedulerName: sched, NodeSelector: sel, Tolerations: []corev1.Toleration{tol},
					Containers: []corev1.Container{{Name: "c", Image: "x", Resources: corev1.ResourceRequirements{
						Limits: corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(1, resource.DecimalSI)},
					}}},
				},
			},
		},
	}
}

// ungroupedSampler polls the pods of ns while a test runs and remembers
// every pod of a gang it saw without spec.schedulingGroup.
type ungroupedSampler struct {
	mu   sync.Mutex
	seen map[string]bool
	stop func()
}

func sampleUngrouped(t *testing.T, ns, selector string) *ungroupedSampler {
	ctx, cancel := context.WithCancel(context.Background())
	s := &ungroupedSampler{seen: map[string]bool{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			list, err := controlPlane.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
			if err == nil {
				s.mu.Lock()
				for _, p := range list.Items {
					if p.Spec.SchedulingGroup == nil {
						s.seen[p.Name] = true
					}
				}
				s.mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	s.stop = func() { cancel(); <-done }
	t.Cleanup(s.stop)
	return s
}

func (s *ungroupedSampler) ungrouped() map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]bool{}
	for k := range s.seen {
		out[k] = true
	}
	return out
}

// defaultSchedulerRig gives a native test its namespace, a pool of 2 nodes
// of gpus GPUs, a default-plugins kube-scheduler of its own (default-<ns>),
// and the rig whose pod-grouper joins that scheduler's pods, its webhook
// configured (the pod-grouper is the caller's to start).
func defaultSchedulerRig(t *testing.T, prefix string, gpus int) (ns, sched string, rig *nativeRig) {
	t.Helper()
	ns = testNamespace(t, prefix)
	gpuPool(t, ns, 2, gpus)
	sched = "default-" + ns
	stopSched, err := localcluster.StartScheduler(context.Background(), controlPlane, localcluster.SchedulerOptions{Config: localcluster.DefaultProfile(sched)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stopSched)
	rig = newNativeRig(t, ns, []string{"unused-" + ns}, []string{sched})
	rig.configure(t)
	return ns, sched, rig
}

// TestNativeWebhookDownCreatesNoUngroupedPod: with the webhook configured
// and its pod-grouper down, the Job controller's pod creates are refused
// (failurePolicy Fail) — over the whole period no pod of the gang exists
// without spec.schedulingGroup — and once the pod-grouper is up the
// controller's retry creates every pod joined to the native PodGroup, which
// the default scheduler binds whole.
func TestNativeWebhookDownCreatesNoUngroupedPod(t *testing.T) {
	ns, sched, rig := defaultSchedulerRig(t, "native-down-", 2)
	sampler := sampleUngrouped(t, ns, "job=train")
	ctx := context.Background()
	job, err := controlPlane.Client.BatchV1().Jobs(ns).Create(ctx, nativeJob("train", ns, sched, 3), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Down: for 5 s no pod of the Job may exist at all.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		list, err := controlPlane.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job=train"})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) > 0 {
			t.Fatalf("pod %s was created while the webhook was down", list.Items[0].Name)
		}
		time.Sleep(200 * time.Millisecond)
	}
	rig.start(t, true)
	pods, err := controlPlane.WaitPodsBound(ctx, ns, "job=train", 3, 3*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	want := nativeGroupName(t, ns, job.UID)
	for _, p := range pods {
		if g := p.Spec.SchedulingGroup; g == nil || g.PodGroupName == nil || *g.PodGroupName != want {
			t.Errorf("pod %s: schedulingGroup %+v, want %s", p.Name, g, want)
		}
	}
	pg, err := controlPlane.Client.SchedulingV1beta1().PodGroups(ns).Get(ctx, want, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if g := pg.Spec.SchedulingPolicy.Gang; g == nil || g.MinCount != 3 {
		t.Errorf("native PodGroup %s policy %+v, want a gang of 3", want, pg.Spec.SchedulingPolicy)
	}
	sampler.stop()
	if u := sampler.ungrouped(); len(u) > 0 {
		t.Errorf("pods seen without spec.schedulingGroup: %v", u)
	}
}

// nativeGroupName is the name of the one native PodGroup of the workload
// with uid in ns, waiting for it to appear.
func nativeGroupName(t *testing.T, ns string, uid types.UID) string {
	t.Helper()
	var name string
	err := localcluster.WaitFor(context.Background(), time.Minute, "the native PodGroup", func(ctx context.Context) (bool, string, error) {
		list, err := controlPlane.Client.SchedulingV1beta1().PodGroups(ns).List(ctx, metav1.ListOptions{LabelSelector: api.LabelWorkloadUID + "=" + string(uid)})
		if err != nil {
			return false, "", err
		}
		if len(list.Items) != 1 {
			return false, fmt.Sprintf("%d PodGroups", len(list.Items)), nil
		}
		name = list.Items[0].Name
		return true, "", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// TestNativeModeSwitchNeverSplitsAGang: a gang grouped the scheduler-plugins
// way before native mode keeps that PodGroup after the switch (a member
// recreated by its controller is not joined natively and binds into the
// old gang), while a workload created after the switch gets a native
// PodGroup: every gang is wholly on one API.
func TestNativeModeSwitchNeverSplitsAGang(t *testing.T) {
	ns, sched := gangTest(t, "native-switch-", 2, 4, nil)
	// muster-scheduler's pods are joined natively too (it hands them to
	// the in-tree plugin, the gate being on).
	rig := newNativeRig(t, ns, []string{sched}, []string{})
	ctx := context.Background()

	// Before: scheduler-plugins mode, no webhook.
	stopOld := rig.start(t, false)
	old, err := controlPlane.Client.BatchV1().Jobs(ns).Create(ctx, nativeJob("old", ns, sched, 2), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	oldPods, err := controlPlane.WaitPodsBound(ctx, ns, "job=old", 2, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	oldPG := oldPods[0].Labels[api.LabelPodGroup]
	if oldPG == "" {
		t.Fatalf("pod %s has no %s label in scheduler-plugins mode", oldPods[0].Name, api.LabelPodGroup)
	}
	stopOld()

	// The switch: the webhook configured, the pod-grouper in native mode.
	rig.configure(t)
	rig.start(t, true)
	sampler := sampleUngrouped(t, ns, "job=new")

	// A member of the old gang goes; its Job makes a new one.
	if err := controlPlane.Client.CoreV1().Pods(ns).Delete(ctx, oldPods[0].Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	err = localcluster.WaitFor(ctx, 2*time.Minute, "the old gang whole again", func(ctx context.Context) (bool, string, error) {
		list, err := controlPlane.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job=old"})
		if err != nil {
			return false, "", err
		}
		bound := 0
		for _, p := range list.Items {
			if p.DeletionTimestamp != nil {
				continue
			}
			if p.Spec.SchedulingGroup != nil {
				return false, "", fmt.Errorf("pod %s of the old gang was joined to native PodGroup %s: the gang is split", p.Name, *p.Spec.SchedulingGroup.PodGroupName)
			}
			if p.Name != oldPods[0].Name && p.Labels[api.LabelPodGroup] == oldPG && p.Spec.NodeName != "" {
				bound++
			}
		}
		return bound == 2, fmt.Sprintf("%d of 2 bound in %s", bound, oldPG), nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// A workload after the switch: native.
	job, err := controlPlane.Client.BatchV1().Jobs(ns).Create(ctx, nativeJob("new", ns, sched, 2), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := nativeGroupName(t, ns, job.UID)
	pods, err := controlPlane.WaitPodsBound(ctx, ns, "job=new", 2, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if g := p.Spec.SchedulingGroup; g == nil || *g.PodGroupName != want {
			t.Errorf("new pod %s: schedulingGroup %+v, want %s", p.Name, g, want)
		}
	}
	sampler.stop()
	if u := sampler.ungrouped(); len(u) > 0 {
		t.Errorf("pods of the new workload seen without spec.schedulingGroup: %v", u)
	}
	if n := nativeGroupsOf(t, ns, old.UID); n != 0 {
		t.Errorf("the old workload got %d native PodGroups, want none", n)
	}
}

func nativeGroupsOf(t *testing.T, ns string, uid types.UID) int {
	t.Helper()
	list, err := controlPlane.Client.SchedulingV1beta1().PodGroups(ns).List(context.Background(), metav1.ListOptions{LabelSelector: api.LabelWorkloadUID + "=" + string(uid)})
	if err != nil {
		t.Fatal(err)
	}
	return len(list.Items)
}

// TestNativeClusterKartaKind: a kind no catalog knows, defined by a cluster
// Karta, is gang-scheduled by the default scheduler in native mode: its
// pods are joined at creation to a native PodGroup of the definition's
// size and bound whole, and a run too big for the nodes binds nothing.
func TestNativeClusterKartaKind(t *testing.T) {
	ctx := context.Background()
	ns, sched, rig := defaultSchedulerRig(t, "native-karta-", 4)
	rig.start(t, true)
	pgrApplyKarta(t, pgrTrainingRunKarta)
	// Valid is written after the definitions are in use: from then on the
	// webhook knows the kind.
	pgrWaitKartaValid(t, "pgr-e2e-trainingrun", "True", "")

	run := func(name string, workers int, gpus int64) types.UID {
		t.Helper()
		spec := nativeJob(name, ns, sched, 1).Spec.Template.Spec
		spec.RestartPolicy = corev1.RestartPolicyAlways
		spec.Containers[0].Resources.Limits["nvidia.com/gpu"] = *resource.NewQuantity(gpus, resource.DecimalSI)
		obj, err := controlPlane.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "acme.example.com/v1", "kind": "TrainingRun",
			"metadata": map[string]any{"name": name},
			"spec":     map[string]any{"workers": workers, "template": map[string]any{"spec": pgrToMap(t, spec)}},
		}}, ns)
		if err != nil {
			t.Fatal(err)
		}
		for i := range workers {
			p := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-worker-%d", name, i),
					Labels:          map[string]string{"acme.example.com/role": "worker", "run": name, "gang": name},
					OwnerReferences: []metav1.OwnerReference{pgrControllerRef(obj)}},
				Spec: spec,
			}
			if _, err := controlPlane.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		return obj.GetUID()
	}

	uid := run("run1", 3, 1)
	want := nativeGroupName(t, ns, uid)
	pg, err := controlPlane.Client.SchedulingV1beta1().PodGroups(ns).Get(ctx, want, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if g := pg.Spec.SchedulingPolicy.Gang; g == nil || g.MinCount != 3 || pg.Labels[api.LabelDefinition] != "pgr-e2e-trainingrun" {
		t.Errorf("native PodGroup %s: policy %+v, labels %v; want a gang of 3 of definition pgr-e2e-trainingrun", want, pg.Spec.SchedulingPolicy, pg.Labels)
	}
	pods, err := controlPlane.WaitPodsBound(ctx, ns, "run=run1", 3, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if g := p.Spec.SchedulingGroup; g == nil || *g.PodGroupName != want {
			t.Errorf("pod %s: schedulingGroup %+v, want %s", p.Name, g, want)
		}
	}

	// 5 GPUs left on nodes of 4: a run of 3 × 3 GPUs must bind none.
	big := nativeGroupName(t, ns, run("run2", 3, 3))
	noneBound(t, ns, "run2", 5*time.Second)
	err = localcluster.WaitFor(ctx, time.Minute, "the scheduler's verdict on "+big, func(ctx context.Context) (bool, string, error) {
		pg, err := controlPlane.Client.SchedulingV1beta1().PodGroups(ns).Get(ctx, big, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		for _, c := range pg.Status.Conditions {
			if c.Type == "PodGroupInitiallyScheduled" && c.Status == metav1.ConditionFalse {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("%+v", pg.Status.Conditions), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestNativeRacingGangsNeverBothPartlyBound: two gangs created at once that
// each need every GPU of the pool. Sampled all along, never are both partly
// bound at the same moment; one ends bound whole and the other holds none.
func TestNativeRacingGangsNeverBothPartlyBound(t *testing.T) {
	ctx := context.Background()
	ns, sched, rig := defaultSchedulerRig(t, "native-race-", 4)
	rig.start(t, true)

	var bothPartly []string
	var mu sync.Mutex
	sampleCtx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for sampleCtx.Err() == nil {
			bound, _, err := boundByGang(sampleCtx, ns)
			if err == nil && bound["a"] > 0 && bound["a"] < 8 && bound["b"] > 0 && bound["b"] < 8 {
				mu.Lock()
				bothPartly = append(bothPartly, fmt.Sprintf("a %d, b %d", bound["a"], bound["b"]))
				mu.Unlock()
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	for _, name := range []string{"a", "b"} {
		job := nativeJob(name, ns, sched, 8)
		job.Spec.Template.Labels["gang"] = name
		if _, err := controlPlane.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	err := localcluster.WaitFor(ctx, 2*time.Minute, "one gang bound whole", gangsBound(ns, func(bound, _ map[string]int) bool {
		return bound["a"] == 8 || bound["b"] == 8
	}))
	if err != nil {
		t.Fatal(err)
	}
	// And it stays so: the other never gets a member while the first holds
	// every GPU.
	holdsFor(t, 3*time.Second, "one gang whole, the other unbound", gangsBound(ns, func(bound, _ map[string]int) bool {
		return bound["a"]+bound["b"] == 8 && (bound["a"] == 0 || bound["b"] == 0)
	}))
	stopSampling()
	<-sampled
	if len(bothPartly) > 0 {
		t.Errorf("both gangs partly bound at once, %d samples, first: %s", len(bothPartly), bothPartly[0])
	}
}

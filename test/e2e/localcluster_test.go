package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	configv1 "k8s.io/kube-scheduler/config/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/utils/ptr"

	"github.com/muster-io/muster/localcluster"
)

// placement is the YAML of a pod spec's nodeSelector and tolerations for a
// node pool, indented for a pod template's spec.
func placement(pool, indent string) string {
	return strings.ReplaceAll(fmt.Sprintf(`nodeSelector:
  %s: %s
tolerations:
- {key: %s, operator: Equal, value: %s, effect: NoSchedule}`, localcluster.PoolLabel, pool, localcluster.PoolLabel, pool), "\n", "\n"+indent)
}

// harnessNamespace gives a harness test its namespace with a pool of nodes
// default nodes.
func harnessNamespace(t *testing.T, prefix string, nodes int) string {
	t.Helper()
	ns := testNamespace(t, prefix)
	testPool(t, ns, nodes, nil)
	return ns
}

// The proof: a Deployment of 3 replicas on 2 fake nodes gets 3
// Running pods through the real ReplicaSet controller and the default
// scheduler; deleting it garbage-collects the pods.
func TestHarnessDeploymentRunsAndIsCollected(t *testing.T) {
	ctx := t.Context()
	ns := harnessNamespace(t, "deploy-", 2)
	applyYAML(t, ns, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      `+placement(ns, "      ")+`
      containers:
      - name: web
        image: nginx
        resources: {requests: {cpu: 100m}}
`)
	pods := waitRunning(t, ns, "app=web", 3)
	nodes := map[string]bool{}
	for _, p := range pods {
		if !strings.HasPrefix(p.Spec.NodeName, ns+"-") {
			t.Errorf("pod %s bound to %q, want a node of pool %s", p.Name, p.Spec.NodeName, ns)
		}
		if len(p.OwnerReferences) != 1 || p.OwnerReferences[0].Kind != "ReplicaSet" {
			t.Errorf("pod %s owners %v, want one ReplicaSet", p.Name, p.OwnerReferences)
		}
		nodes[p.Spec.NodeName] = true
	}
	// The default profile spreads replicas of one owner over nodes.
	if len(nodes) != 2 {
		t.Errorf("pods on nodes %v, want both pool nodes used", nodes)
	}
	waitFor(t, localcluster.ShortTimeout, "Deployment web 3 ready replicas", objectIs(controlPlane.Client.AppsV1().Deployments(ns), "web", func(d *appsv1.Deployment) (bool, string) {
		return d.Status.ReadyReplicas == 3, fmt.Sprintf("readyReplicas=%d", d.Status.ReadyReplicas)
	}))

	if err := controlPlane.Client.AppsV1().Deployments(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, ns, "app=web")
	rs, err := controlPlane.Client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs.Items) != 0 {
		t.Errorf("ReplicaSets left after the Deployment was deleted: %d", len(rs.Items))
	}
}

func TestHarnessJobRunsToCompletion(t *testing.T) {
	ctx := t.Context()
	ns := harnessNamespace(t, "job-", 1)
	applyYAML(t, ns, `
apiVersion: batch/v1
kind: Job
metadata: {name: train}
spec:
  parallelism: 2
  completions: 2
  template:
    metadata: {labels: {app: train}}
    spec:
      restartPolicy: Never
      `+placement(ns, "      ")+`
      containers: [{name: main, image: busybox}]
`)
	pods := waitRunning(t, ns, "app=train", 2)
	for _, p := range pods {
		if err := podSim.Succeed(ctx, ns, p.Name); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, localcluster.ShortTimeout, "Job train Complete", objectIs(controlPlane.Client.BatchV1().Jobs(ns), "train", func(job *batchv1.Job) (bool, string) {
		for _, c := range job.Status.Conditions {
			if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
				return true, ""
			}
		}
		return false, fmt.Sprintf("succeeded=%d active=%d conditions=%v", job.Status.Succeeded, job.Status.Active, job.Status.Conditions)
	}))
}

func TestHarnessStatefulSetParallel(t *testing.T) {
	ns := harnessNamespace(t, "sts-", 2)
	applyYAML(t, ns, `
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  replicas: 3
  serviceName: db
  podManagementPolicy: Parallel
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      `+placement(ns, "      ")+`
      containers: [{name: db, image: postgres}]
`)
	pods := waitRunning(t, ns, "app=db", 3)
	for i, p := range pods {
		if want := fmt.Sprintf("db-%d", i); p.Name != want {
			t.Errorf("pod %d is %s, want %s", i, p.Name, want)
		}
	}
	waitFor(t, localcluster.ShortTimeout, "StatefulSet db 3 ready", objectIs(controlPlane.Client.AppsV1().StatefulSets(ns), "db", func(ss *appsv1.StatefulSet) (bool, string) {
		return ss.Status.ReadyReplicas == 3, fmt.Sprintf("readyReplicas=%d", ss.Status.ReadyReplicas)
	}))
}

// OrderedReady StatefulSets wait for each pod to be Running and Ready before
// creating the next: only the simulator makes that progress.
func TestHarnessStatefulSetOrderedReady(t *testing.T) {
	ctx := t.Context()
	ns := harnessNamespace(t, "sts-ordered-", 1)
	sel, tol := localcluster.PoolPlacement(ns)
	ss := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "zk"},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To[int32](3),
			ServiceName: "zk",
			Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": "zk"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "zk"}},
				Spec: corev1.PodSpec{
					NodeSelector: sel, Tolerations: []corev1.Toleration{tol},
					Containers: []corev1.Container{{Name: "zk", Image: "zookeeper"}},
				},
			},
		},
	}
	if _, err := controlPlane.Client.AppsV1().StatefulSets(ns).Create(ctx, ss, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, ns, "app=zk", 3)
}

func TestHarnessCronJobBackdated(t *testing.T) {
	ctx := t.Context()
	ns := harnessNamespace(t, "cron-", 1)
	applyYAML(t, ns, `
apiVersion: batch/v1
kind: CronJob
metadata: {name: nightly}
spec:
  schedule: "*/1 * * * *"
  jobTemplate:
    spec:
      template:
        metadata: {labels: {app: nightly}}
        spec:
          restartPolicy: Never
          `+placement(ns, "          ")+`
          containers: [{name: main, image: busybox}]
`)
	if err := controlPlane.BackdateCronJob(ctx, ns, "nightly", 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, ns, "app=nightly", 1)
}

// A custom resource installed after the garbage collector started still
// owns its pods: the GC's one-second discovery sync picks the kind up.
func TestHarnessGCCollectsPodsOfLateCRD(t *testing.T) {
	ctx := t.Context()
	ns := harnessNamespace(t, "gc-", 1)
	crd := localcluster.WithScale(localcluster.PermissiveCRD("localcluster.muster.io", "v1", "Widget", "widgets", apiextensionsv1.NamespaceScoped, "wdg"),
		".spec.replicas", ".status.replicas", "")
	if err := controlPlane.InstallCRD(ctx, crd); err != nil {
		t.Fatal(err)
	}
	objs := applyYAML(t, ns, `
apiVersion: localcluster.muster.io/v1
kind: Widget
metadata: {name: w}
spec:
  replicas: 2
  anything: {goes: [1, 2]}
`)
	w := objs[0]
	if got, _, _ := unstructured.NestedSlice(w.Object, "spec", "anything", "goes"); len(got) != 2 {
		t.Errorf("permissive CRD dropped unknown fields: spec=%v", w.Object["spec"])
	}
	sel, tol := localcluster.PoolPlacement(ns)
	for i := 0; i < 2; i++ {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name:   fmt.Sprintf("w-%d", i),
				Labels: map[string]string{"app": "widget"},
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: "localcluster.muster.io/v1", Kind: "Widget", Name: w.GetName(), UID: w.GetUID(),
					Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
				}},
			},
			Spec: corev1.PodSpec{NodeSelector: sel, Tolerations: []corev1.Toleration{tol},
				Containers: []corev1.Container{{Name: "main", Image: "busybox"}}},
		}
		if _, err := controlPlane.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitRunning(t, ns, "app=widget", 2)
	ri, err := controlPlane.ResourceFor(w, ns)
	if err != nil {
		t.Fatal(err)
	}
	if err := ri.Delete(ctx, w.GetName(), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, ns, "app=widget")
}

func TestHarnessPodSimulatorFailsPodOnRequest(t *testing.T) {
	ctx := t.Context()
	ns := testNamespace(t, "fail-")
	gpuPool(t, ns, 1, 8)
	sel, tol := localcluster.PoolPlacement(ns)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu", Labels: map[string]string{"app": "gpu"}},
		Spec: corev1.PodSpec{NodeSelector: sel, Tolerations: []corev1.Toleration{tol}, RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "main", Image: "cuda", Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{localcluster.DefaultGPUResource: resource.MustParse("8")}}}}},
	}
	if _, err := controlPlane.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := waitRunning(t, ns, "app=gpu", 1)
	if cs := pods[0].Status.ContainerStatuses; len(cs) != 1 || cs[0].State.Running == nil || !cs[0].Ready {
		t.Errorf("container statuses of a running pod: %+v", cs)
	}
	if err := podSim.Fail(ctx, ns, "gpu", "OOMKilled"); err != nil {
		t.Fatal(err)
	}
	got, err := controlPlane.Client.CoreV1().Pods(ns).Get(ctx, "gpu", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != corev1.PodFailed || got.Status.ContainerStatuses[0].State.Terminated == nil ||
		got.Status.ContainerStatuses[0].State.Terminated.Reason != "OOMKilled" {
		t.Errorf("after Fail: phase %s, container state %+v", got.Status.Phase, got.Status.ContainerStatuses[0].State)
	}
	// A ninth GPU does not fit the 8-GPU node: the fake node's capacity counts.
	pod2 := pod.DeepCopy()
	pod2.Name, pod2.Labels = "too-big", map[string]string{"app": "too-big"}
	pod2.Spec.Containers[0].Resources.Limits[localcluster.DefaultGPUResource] = resource.MustParse("9")
	if _, err := controlPlane.Client.CoreV1().Pods(ns).Create(ctx, pod2, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUnschedulable(t, ns, "too-big", "Insufficient nvidia.com/gpu", localcluster.ShortTimeout)
}

func TestHarnessKubeconfigAndNativePodGroups(t *testing.T) {
	cfg, err := clientcmd.BuildConfigFromFlags("", controlPlane.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().Get(t.Context(), "default", metav1.GetOptions{}); err != nil {
		t.Fatalf("client from kubeconfig %s: %v", controlPlane.KubeconfigPath, err)
	}
	res, err := cs.Discovery().ServerResourcesForGroupVersion("scheduling.k8s.io/v1beta1")
	if err != nil {
		t.Fatalf("scheduling.k8s.io/v1beta1 not served with NativePodGroups: %v", err)
	}
	var names []string
	for _, r := range res.APIResources {
		names = append(names, r.Name)
	}
	if !strings.Contains(strings.Join(names, ","), "podgroups") {
		t.Errorf("scheduling.k8s.io/v1beta1 resources %v, want podgroups", names)
	}
}

// vetoPlugin is a tiny out-of-tree Filter plugin: it rejects nodes carrying
// the label vetoLabel. It proves custom profiles and registries work.
type vetoPlugin struct{}

const vetoName, vetoLabel = "HarnessVeto", "localcluster.muster.io/veto"

func (vetoPlugin) Name() string { return vetoName }
func (vetoPlugin) Filter(_ context.Context, _ fwk.CycleState, _ *corev1.Pod, ni fwk.NodeInfo) *fwk.Status {
	if _, ok := ni.Node().Labels[vetoLabel]; ok {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "vetoed")
	}
	return nil
}

func newVeto(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) {
	return vetoPlugin{}, nil
}

var _ fwk.FilterPlugin = vetoPlugin{}

// Both ways of running a scheduler with an out-of-tree plugin: the
// pkg/scheduler path and the kube-scheduler app path with a config file.
func TestHarnessCustomSchedulers(t *testing.T) {
	ctx := t.Context()
	ns := testNamespace(t, "sched-")
	testPool(t, ns, 2, func(i int) localcluster.NodeSpec {
		var s localcluster.NodeSpec
		if i == 0 {
			s.Labels = map[string]string{vetoLabel: "yes"}
		}
		return s
	})
	cfg := localcluster.DefaultProfile("harness-veto")
	cfg.Profiles[0].Plugins = &configv1.Plugins{Filter: configv1.PluginSet{Enabled: []configv1.Plugin{{Name: vetoName}}}}
	stop, err := localcluster.StartScheduler(ctx, controlPlane, localcluster.SchedulerOptions{
		Config: cfg, OutOfTreeRegistry: frameworkruntime.Registry{vetoName: newVeto},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	stopApp, err := localcluster.StartSchedulerApp(ctx, controlPlane, []byte(`
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: harness-veto-app
  plugins:
    filter:
      enabled: [{name: `+vetoName+`}]
`), app.WithPlugin(vetoName, newVeto))
	if err != nil {
		t.Fatal(err)
	}
	defer stopApp()

	sel, tol := localcluster.PoolPlacement(ns)
	for _, sched := range []string{"harness-veto", "harness-veto-app"} {
		for i := 0; i < 3; i++ {
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", sched, i), Labels: map[string]string{"sched": sched}},
				Spec: corev1.PodSpec{SchedulerName: sched, NodeSelector: sel, Tolerations: []corev1.Toleration{tol},
					Containers: []corev1.Container{{Name: "main", Image: "busybox"}}},
			}
			if _, err := controlPlane.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		pods, err := controlPlane.WaitPodsBound(ctx, ns, "sched="+sched, 3, localcluster.ShortTimeout)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods {
			if p.Spec.NodeName != ns+"-1" {
				t.Errorf("%s: pod %s on %s, want %s-1 (node 0 is vetoed)", sched, p.Name, p.Spec.NodeName, ns)
			}
		}
	}
}

func TestTopologyLabels(t *testing.T) {
	tests := []struct {
		name string
		topo localcluster.Topology
		i    int
		want [3]string // zone, block, rack
	}{
		{"one zone by default", localcluster.Topology{}, 9, [3]string{"zone-0", "block-0-1", "rack-0-1-0"}},
		{"zones ignored without a node count", localcluster.Topology{Zones: 3}, 5, [3]string{"zone-0", "block-0-0", "rack-0-0-1"}},
		{"first node of second zone", localcluster.Topology{Nodes: 4, Zones: 2, NodesPerRack: 2, RacksPerBlock: 2}, 2, [3]string{"zone-1", "block-1-0", "rack-1-0-0"}},
		{"uneven split keeps zones contiguous", localcluster.Topology{Nodes: 5, Zones: 2, NodesPerRack: 1, RacksPerBlock: 2}, 2, [3]string{"zone-0", "block-0-1", "rack-0-1-0"}},
		{"uneven split, next zone restarts racks", localcluster.Topology{Nodes: 5, Zones: 2, NodesPerRack: 1, RacksPerBlock: 2}, 3, [3]string{"zone-1", "block-1-0", "rack-1-0-0"}},
		{"one node per zone", localcluster.Topology{Nodes: 3, Zones: 3}, 2, [3]string{"zone-2", "block-2-0", "rack-2-0-0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := tt.topo.Labels(tt.i)
			got := [3]string{l[localcluster.ZoneLabel], l[localcluster.BlockLabel], l[localcluster.RackLabel]}
			if got != tt.want {
				t.Errorf("Labels(%d) = %v, want %v", tt.i, got, tt.want)
			}
		})
	}
}

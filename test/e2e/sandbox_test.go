package e2e

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/cli"
	sandboxapp "github.com/muster-io/muster/cmd/muster-sandbox/app"
	"github.com/muster-io/muster/localcluster"
)

// The sandbox runs in this process with a control plane of its own (the
// shared one is not involved), as `make run` runs it: muster-scheduler on
// the shipped configuration, the pod-grouper, the real JobSet and
// LeaderWorkerSet operators and the examples of examples/.

// syncBuffer is an io.Writer safe for the sandbox's goroutines that tells
// when a line with a given prefix has been written.
type syncBuffer struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	ready chan struct{}
	once  sync.Once
}

var readyLine = regexp.MustCompile(`(?m)^ready: kubeconfig=`)

func newSyncBuffer() *syncBuffer { return &syncBuffer{ready: make(chan struct{})} }

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.buf.Write(p)
	if readyLine.Match(b.buf.Bytes()) {
		b.once.Do(func() { close(b.ready) })
	}
	return n, err
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// runningSandbox is a sandbox started with --keep, up until stop.
type runningSandbox struct {
	kubeconfig       string
	stdout, progress *syncBuffer
	kube             kubernetes.Interface
	dyn              dynamic.Interface
	stop             func() error
}

// startSandbox runs sandboxapp.Run with Keep in the background and returns once
// it has printed its ready line. stop ends it as Ctrl-C would and returns
// Run's error; it also runs at cleanup.
func startSandbox(t *testing.T, cfg sandboxapp.Config) *runningSandbox {
	t.Helper()
	dir := t.TempDir()
	s := &runningSandbox{kubeconfig: filepath.Join(dir, "kubeconfig"), stdout: newSyncBuffer(), progress: newSyncBuffer()}
	cfg.Kubeconfig, cfg.Keep = s.kubeconfig, true
	cfg.Stdout, cfg.Stderr = s.stdout, s.progress
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sandboxapp.Run(ctx, cfg) }()
	s.stop = sync.OnceValue(func() error {
		cancel()
		return <-done
	})
	t.Cleanup(func() {
		// The same error as the test's own stop, if it called it.
		if err := s.stop(); err != nil {
			t.Errorf("sandbox: %v", err)
		}
	})

	// Operators are built on first use (about two minutes each when the
	// build cache is cold); the sandbox bounds each of its own waits.
	select {
	case <-s.stdout.ready:
	case err := <-done:
		done <- err // for stop
		t.Fatalf("sandbox ended before it was ready: %v\nprogress:\n%s\nstdout:\n%s", err, s.progress.String(), s.stdout.String())
	}
	rc, err := clientcmd.BuildConfigFromFlags("", s.kubeconfig)
	if err != nil {
		t.Fatalf("the sandbox's kubeconfig: %v", err)
	}
	s.kube = kubernetes.NewForConfigOrDie(rc)
	s.dyn = dynamic.NewForConfigOrDie(rc)
	return s
}

var podGroupsGVR = schema.GroupVersionResource{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "podgroups"}

// podGroupsOf lists the PodGroups the pod-grouper made for a workload.
func (s *runningSandbox) podGroupsOf(t *testing.T, ns, kind, name string) []unstructured.Unstructured {
	t.Helper()
	list, err := s.dyn.Resource(podGroupsGVR).Namespace(ns).List(context.Background(), metav1.ListOptions{
		LabelSelector: api.LabelWorkloadKind + "=" + kind + "," + api.LabelWorkloadName + "=" + name,
	})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// muster runs the CLI in-process against the sandbox.
func (s *runningSandbox) muster(t testing.TB, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	env := cli.NewEnv(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	env.Getenv = func(string) string { return "" }
	code = cli.Run(t.Context(), env, append([]string{"--kubeconfig", s.kubeconfig, "--cache-dir", t.TempDir()}, args...))
	return out.String(), errOut.String(), code
}

func (s *runningSandbox) pods(t *testing.T, ns, selector string) []corev1.Pod {
	t.Helper()
	list, err := s.kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func TestSandboxExamples(t *testing.T) {
	sb := startSandbox(t, sandboxapp.Config{Nodes: 4, GPUsPerNode: 8, Zones: 2})
	ns := sandboxapp.ExampleNamespace
	out := sb.stdout.String()
	progress := sb.progress.String()
	t.Logf("progress:\n%s", progress)

	// The JobSet of a leader and two workers, 4 GPUs each: one gang.
	pgs := sb.podGroupsOf(t, ns, "JobSet", "train")
	if len(pgs) != 1 {
		t.Fatalf("JobSet train: %d PodGroups, want 1", len(pgs))
	}
	pg := pgs[0]
	if mm, _, _ := unstructured.NestedInt64(pg.Object, "spec", "minMember"); mm != 3 {
		t.Errorf("PodGroup %s minMember %d, want 3", pg.GetName(), mm)
	}
	if gpus, _, _ := unstructured.NestedString(pg.Object, "spec", "minResources", "nvidia.com/gpu"); gpus != "12" {
		t.Errorf("PodGroup %s minResources nvidia.com/gpu %q, want 12", pg.GetName(), gpus)
	}
	trainPods := sb.pods(t, ns, "jobset.sigs.k8s.io/jobset-name=train")
	if len(trainPods) != 3 {
		t.Errorf("JobSet train: %d pods, want 3", len(trainPods))
	}
	for _, p := range trainPods {
		if p.Spec.NodeName == "" || p.Labels[api.LabelPodGroup] != pg.GetName() {
			t.Errorf("JobSet pod %s: node %q, PodGroup label %q; want bound, in %s", p.Name, p.Spec.NodeName, p.Labels[api.LabelPodGroup], pg.GetName())
		}
	}

	// The LeaderWorkerSet of 2 groups of 2: a gang per group.
	lwsGroups := sb.podGroupsOf(t, ns, "LeaderWorkerSet", "serve")
	if len(lwsGroups) != 2 {
		t.Errorf("LeaderWorkerSet serve: %d PodGroups, want 2 (one per group)", len(lwsGroups))
	}
	for _, pg := range lwsGroups {
		if mm, _, _ := unstructured.NestedInt64(pg.Object, "spec", "minMember"); mm != 2 {
			t.Errorf("PodGroup %s minMember %d, want 2", pg.GetName(), mm)
		}
	}
	for _, p := range sb.pods(t, ns, "leaderworkerset.sigs.k8s.io/name=serve") {
		if p.Spec.NodeName == "" {
			t.Errorf("LeaderWorkerSet pod %s not bound", p.Name)
		}
	}

	// The Deployment: gang-free pods, each bound on its own.
	depPods := sb.pods(t, ns, "app=embeddings")
	if len(depPods) != 2 {
		t.Errorf("Deployment embeddings: %d pods, want 2", len(depPods))
	}
	for _, p := range depPods {
		if p.Spec.NodeName == "" || p.Annotations[api.AnnotationGrouping] != api.GroupingNone || p.Labels[api.LabelPodGroup] != "" {
			t.Errorf("Deployment pod %s: node %q, %s=%q, PodGroup label %q; want bound and gang-free", p.Name,
				p.Spec.NodeName, api.AnnotationGrouping, p.Annotations[api.AnnotationGrouping], p.Labels[api.LabelPodGroup])
		}
	}
	if pgs := sb.podGroupsOf(t, ns, "Deployment", "embeddings"); len(pgs) != 0 {
		t.Errorf("Deployment embeddings has %d PodGroups, want none", len(pgs))
	}

	// The gang that cannot fit: none of its pods bound.
	for _, p := range sb.pods(t, ns, "jobset.sigs.k8s.io/jobset-name=pretrain") {
		if p.Spec.NodeName != "" {
			t.Errorf("pod %s of the gang that cannot fit is bound to %s: a gang must bind whole or not at all", p.Name, p.Spec.NodeName)
		}
	}

	// The printed `muster describe` views.
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^\$ muster describe jobset/train -n examples$`),
		regexp.MustCompile(`(?m)^GPUs:\s+12$`),
		// The gang row: name, min-member 3, 3 of 3 bound, the 12 GPUs.
		regexp.MustCompile(`(?m)^\s+train\s+3\s+3/3\s+\S+\s+.*nvidia\.com/gpu=12`),
		regexp.MustCompile(`(?m)^\s+serve-group-\S+\s+2\s+2/2\s`),
		regexp.MustCompile(`(?m)^Gangs: none`),
		// The gang too big: 0 of 5 bound, with the scheduler's reason after its resources.
		regexp.MustCompile(`(?m)^\s+pretrain\s+5\s+0/5\s+\S+\s+.*nvidia\.com/gpu=40\s+\S.*$`),
	} {
		if !want.MatchString(out) {
			t.Errorf("stdout lacks %s:\n%s", want, out)
		}
	}
	for _, step := range []string{"kube-apiserver ready", "4 nodes × 8 GPUs in 2 zones", "muster-scheduler running", "pod-grouper running",
		"jobset operator running", "lws operator running", "example 01-jobset-train.yaml scheduled"} {
		if !strings.Contains(progress, step) {
			t.Errorf("progress lacks %q", step)
		}
	}

	// Ctrl-C: operators stopped, their webhooks gone, the kubeconfig removed.
	webhooks, err := sb.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().List(context.Background(), metav1.ListOptions{})
	if err != nil || len(webhooks.Items) == 0 {
		t.Errorf("no operator webhooks registered while up (%v)", err)
	}
	if err := sb.stop(); err != nil {
		t.Fatalf("sandbox: %v", err)
	}
	if !strings.Contains(sb.progress.String(), "stopped in") {
		t.Errorf("no stop line:\n%s", sb.progress.String())
	}
	if _, err := os.Stat(sb.kubeconfig); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("kubeconfig %s left behind (%v)", sb.kubeconfig, err)
	}
}

// With --no-examples the sandbox is an empty cluster with muster: nodes, the
// scheduler and the pod-grouper, no operators, ready at once.
func TestSandboxNoExamples(t *testing.T) {
	sb := startSandbox(t, sandboxapp.Config{Nodes: 3, GPUsPerNode: 4, Zones: 3, NoExamples: true})
	if !strings.Contains(sb.stdout.String(), "ready: kubeconfig="+sb.kubeconfig) {
		t.Errorf("no ready line naming the kubeconfig:\n%s", sb.stdout.String())
	}
	nodes, err := sb.kube.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	zones := map[string]bool{}
	for _, n := range nodes.Items {
		zones[n.Labels[localcluster.ZoneLabel]] = true
		if q := n.Status.Capacity[localcluster.DefaultGPUResource]; q.Value() != 4 {
			t.Errorf("node %s has %s GPUs, want 4", n.Name, q.String())
		}
	}
	if len(nodes.Items) != 3 || len(zones) != 3 {
		t.Errorf("%d nodes in %d zones, want 3 in 3", len(nodes.Items), len(zones))
	}
	// The shipped CRDs are served; nothing was applied.
	for _, crd := range []string{"kartas.run.ai", "podgroups.scheduling.x-k8s.io"} {
		if _, err := sb.dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}).
			Get(context.Background(), crd, metav1.GetOptions{}); err != nil {
			t.Errorf("CRD %s: %v", crd, err)
		}
	}
	if _, err := sb.kube.CoreV1().Namespaces().Get(context.Background(), sandboxapp.ExampleNamespace, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace %s with --no-examples: want NotFound, got err %v", sandboxapp.ExampleNamespace, err)
	}
	// The pod-grouper elects a leader like the shipped one.
	if _, err := sb.kube.CoordinationV1().Leases("kube-system").Get(context.Background(), "muster-podgrouper", metav1.GetOptions{}); err != nil {
		t.Errorf("pod-grouper lease: %v", err)
	}
	// kubectl delete ns ends: the namespace controller empties and removes it.
	nsObj, err := sb.kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "scratch"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "left-behind"}, Data: map[string]string{"a": "b"}}
	if _, err := sb.kube.CoreV1().ConfigMaps(nsObj.Name).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := sb.kube.CoreV1().Namespaces().Delete(context.Background(), nsObj.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, localcluster.ShortTimeout, "namespace scratch deleted", objectGone[*corev1.Namespace](sb.kube.CoreV1().Namespaces(), nsObj.Name))
	progress := sb.progress.String()
	for _, step := range []string{"kube-apiserver ready", "3 nodes × 4 GPUs in 3 zones", "muster-scheduler running", "pod-grouper running"} {
		if !strings.Contains(progress, step) {
			t.Errorf("progress lacks %q:\n%s", step, progress)
		}
	}
	if strings.Contains(progress, "operator") {
		t.Errorf("operators started with --no-examples:\n%s", progress)
	}
	if err := sb.stop(); err != nil {
		t.Fatalf("sandbox: %v", err)
	}
}

// A kubeconfig that is not the sandbox's own is never overwritten (the
// sandbox deletes its kubeconfig at exit).
func TestSandboxRefusesForeignKubeconfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config")
	foreign := "apiVersion: v1\nkind: Config\ncontexts:\n- name: prod\n  context: {cluster: prod, user: me}\ncurrent-context: prod\n"
	if err := os.WriteFile(path, []byte(foreign), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, progress bytes.Buffer
	err := sandboxapp.Run(t.Context(), sandboxapp.Config{Nodes: 1, Zones: 1, Kubeconfig: path, Stdout: &out, Stderr: &progress})
	if err == nil || !strings.Contains(err.Error(), `context "prod"`) {
		t.Fatalf("Run with a foreign kubeconfig: err = %v, want a refusal naming the context", err)
	}
	if b, _ := os.ReadFile(path); string(b) != foreign {
		t.Errorf("foreign kubeconfig changed:\n%s", b)
	}
}

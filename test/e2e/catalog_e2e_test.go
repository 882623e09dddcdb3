package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/localcluster"
)

// The catalog end to end: the real operators (JobSet, LeaderWorkerSet) and
// the real built-in controllers make the pods, the pod-grouper (in-process,
// embedded catalog) groups them, and the muster scheduler (kube-scheduler's
// app path, shipped configuration, gang plugin) binds them.

// catGPUs returns the nvidia.com/gpu minResources of pg.
func catGPUs(pg *schedv1alpha1.PodGroup) int64 {
	q := pg.Spec.MinResources[localcluster.DefaultGPUResource]
	return q.Value()
}

// catWaitCollected waits until ns has no PodGroups and no pods matching
// selector: the garbage collector followed the owner references.
func catWaitCollected(t testing.TB, ns, selector string) {
	t.Helper()
	waitFor(t, time.Minute, "PodGroups of "+ns+" garbage-collected", func(ctx context.Context) (bool, string, error) {
		l, err := podGroups(t).SchedulingV1alpha1().PodGroups(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		var left []string
		for _, pg := range l.Items {
			left = append(left, pg.Name)
		}
		return len(left) == 0, fmt.Sprint(left), nil
	})
	if err := controlPlane.WaitPodsGone(context.Background(), ns, selector, time.Minute); err != nil {
		t.Fatal(err)
	}
}

// catFullStack starts what a full-stack test runs: the named operator, a
// pod-grouper and the shipped scheduler for catSchedulerName. It returns
// when it began, to time the start-up.
func catFullStack(t *testing.T, operator string) time.Time {
	t.Helper()
	begin := time.Now()
	startOperator(t, operator)
	startPodGrouper(t, catSchedulerName)
	startShippedScheduler(t)
	return begin
}

// TestCatalogJobSetFullStack: the seed JobSet (one leader Job, two worker
// Jobs, 4 GPUs per pod) made by the real JobSet operator becomes one
// PodGroup of 3 members and 12 GPUs, bound all or nothing; on a pool with
// 8 GPUs nothing binds and the pods say why; deleting the JobSet collects
// the PodGroup and the pods.
func TestCatalogJobSetFullStack(t *testing.T) {
	begin := catFullStack(t, "jobset")
	ctx := context.Background()
	fits := testNamespace(t, "cat-js-fits-")
	short := testNamespace(t, "cat-js-short-")
	gpuPool(t, fits, 2, 8)
	// Room for two of the three 4-GPU pods.
	gpuPool(t, short, 2, 4)
	t.Logf("operator, pod-grouper, scheduler and pools up in %s", time.Since(begin).Round(time.Millisecond))

	watchers := map[string]*partialWatcher{}
	jobsets := map[string]*unstructured.Unstructured{}
	for _, ns := range []string{fits, short} {
		watchers[ns] = watchPodGroupBinding(t, ns, map[string]int{"train": 3})
		jobsets[ns] = applyYAML(t, ns, jobSetYAML("train", ns, catSchedulerName))[0]
	}
	created := time.Now()
	sel := "jobset.sigs.k8s.io/jobset-name=train"
	for _, ns := range []string{fits, short} {
		pg := pgrWaitPodGroup(t, ns, "train", "minMember 3, 12 GPUs", func(pg *schedv1alpha1.PodGroup) bool {
			return pg.Spec.MinMember == 3 && catGPUs(pg) == 12
		})
		if pg.Labels[api.LabelDefinition] != "jobset" || pg.Labels[api.LabelWorkloadKind] != "JobSet" || pg.Labels[api.LabelWorkloadName] != "train" {
			t.Errorf("%s: PodGroup labels %v", ns, pg.Labels)
		}
		if len(pg.OwnerReferences) != 1 || pg.OwnerReferences[0].UID != jobsets[ns].GetUID() || !ptr.Deref(pg.OwnerReferences[0].Controller, false) {
			t.Errorf("%s: PodGroup owners %+v, want the JobSet", ns, pg.OwnerReferences)
		}
		pods := pgrWaitPods(t, ns, sel, 3, "in PodGroup train", pgrInGroup("train"))
		for _, p := range pods {
			// The operator made these: Job-owned, with its labels.
			if len(p.OwnerReferences) != 1 || p.OwnerReferences[0].Kind != "Job" || p.Labels["jobset.sigs.k8s.io/replicatedjob-name"] == "" {
				t.Errorf("%s: pod %s owners %v labels %v: not a JobSet operator pod", ns, p.Name, p.OwnerReferences, p.Labels)
			}
		}
		if got := podGroupNames(t, ns); strings.Join(got, ",") != "train" {
			t.Errorf("%s: PodGroups %v, want exactly [train]", ns, got)
		}
	}
	if _, err := controlPlane.WaitPodsBound(ctx, fits, sel, 3, gangTimeout); err != nil {
		t.Fatal(err)
	}
	t.Logf("JobSet created → 3 pods grouped and bound in %s", time.Since(created).Round(time.Millisecond))

	// Room for 8 GPUs: the PodGroup and every member say why, none binds.
	want := []string{"gang " + short + "/train", "needs 12 nvidia.com/gpu", "best placement fits 2 of 3 members"}
	waitEvent(t, short, "PodGroup", "train", "GangUnschedulable", want)
	catWaitMembersUnschedulable(t, short, sel, 3, want)
	if bound, err := boundPods(ctx, short, api.LabelPodGroup); err != nil || len(bound["train"]) != 0 {
		t.Errorf("with room for 8 GPUs: %d members bound (err %v), want 0", len(bound["train"]), err)
	}
	for _, ns := range []string{fits, short} {
		watchers[ns].check(t)
	}

	begin = time.Now()
	for _, ns := range []string{fits, short} {
		if err := controlPlane.Dynamic.Resource(jobsetsGVR).Namespace(ns).Delete(ctx, "train", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, ns := range []string{fits, short} {
		catWaitCollected(t, ns, sel)
	}
	t.Logf("JobSet deleted → PodGroup and pods collected in %s", time.Since(begin).Round(time.Millisecond))
}

// TestCatalogLeaderWorkerSetFullStack: LWS replicas 2, size 2, made by the
// real LWS operator (worker pods owned by a StatefulSet owned by the leader
// pod) becomes two PodGroups of 2 members, each bound whole.
func TestCatalogLeaderWorkerSetFullStack(t *testing.T) {
	begin := catFullStack(t, "lws")
	ctx := context.Background()
	ns := testNamespace(t, "cat-lws-")
	gpuPool(t, ns, 2, 8)
	t.Logf("operator, pod-grouper, scheduler and pool up in %s", time.Since(begin).Round(time.Millisecond))
	w := watchPodGroupBinding(t, ns, map[string]int{"serve-group-0": 2, "serve-group-1": 2})
	lws := applyYAML(t, ns, lwsYAML(ns, catSchedulerName, 4))[0]
	created := time.Now()
	for g := range 2 {
		name := fmt.Sprintf("serve-group-%d", g)
		pg := pgrWaitPodGroup(t, ns, name, "minMember 2, 8 GPUs", func(pg *schedv1alpha1.PodGroup) bool {
			return pg.Spec.MinMember == 2 && catGPUs(pg) == 8
		})
		if len(pg.OwnerReferences) != 1 || pg.OwnerReferences[0].UID != lws.GetUID() {
			t.Errorf("PodGroup %s owners %+v, want the LeaderWorkerSet", name, pg.OwnerReferences)
		}
		pods := pgrWaitPods(t, ns, fmt.Sprintf("leaderworkerset.sigs.k8s.io/group-index=%d", g), 2, "in "+name, pgrInGroup(name))
		// One leader (owned by the leader StatefulSet) and one worker owned
		// by the StatefulSet the leader pod owns.
		var leader *corev1.Pod
		for i := range pods {
			if pods[i].Name == fmt.Sprintf("serve-%d", g) {
				leader = &pods[i]
			}
		}
		if leader == nil {
			t.Fatalf("group %d: no leader pod serve-%d among %d pods", g, g, len(pods))
		}
		for _, p := range pods {
			if p.Name == leader.Name {
				continue
			}
			sts, err := controlPlane.Client.AppsV1().StatefulSets(ns).Get(ctx, p.OwnerReferences[0].Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(sts.OwnerReferences) != 1 || sts.OwnerReferences[0].Kind != "Pod" || sts.OwnerReferences[0].UID != leader.UID {
				t.Errorf("worker %s: StatefulSet %s owners %v, want the leader pod %s", p.Name, sts.Name, sts.OwnerReferences, leader.Name)
			}
		}
	}
	if got := podGroupNames(t, ns); strings.Join(got, ",") != "serve-group-0,serve-group-1" {
		t.Errorf("PodGroups %v, want serve-group-0 and serve-group-1", got)
	}
	sel := "leaderworkerset.sigs.k8s.io/name=serve"
	if _, err := controlPlane.WaitPodsBound(ctx, ns, sel, 4, gangTimeout); err != nil {
		t.Fatal(err)
	}
	t.Logf("LWS created → 4 pods in 2 PodGroups, bound in %s", time.Since(created).Round(time.Millisecond))
	w.check(t)

	begin = time.Now()
	if err := controlPlane.Dynamic.Resource(lwsGVR).Namespace(ns).Delete(ctx, "serve", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	catWaitCollected(t, ns, sel)
	t.Logf("LWS deleted → PodGroups and pods collected in %s", time.Since(begin).Round(time.Millisecond))
}

// catOperatorGroups are API groups whose CRDs are the real operators'
// (installed by operators_test.go), which validate what a fixture holds.
var catOperatorGroups = map[string]bool{"jobset.x-k8s.io": true, "leaderworkerset.x-k8s.io": true}

// catNeedsRealControllers tells whether a fixture meets a built-in
// controller (Deployment, ReplicaSet, StatefulSet) or a real operator CRD.
func catNeedsRealControllers(f *catFixture) bool {
	for _, o := range append([]*unstructured.Unstructured{f.root}, f.children...) {
		if pgrControllerKinds[o.GroupVersionKind().GroupKind()] || catOperatorGroups[o.GroupVersionKind().Group] {
			return true
		}
	}
	return false
}

// TestCatalogFixturesWithControllers replays the catalog fixtures whose
// objects the built-in controllers act on, or whose kinds have the real
// operators' CRDs, exactly (see catalog_replay_test.go), and checks the
// PodGroups (names, min-member, min-resources) and the pod labels against
// expected.yaml. Together with TestPodGrouperCatalogFixtures every fixture
// is replayed.
func TestCatalogFixturesWithControllers(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join(pgrRepoRoot(), "catalog", "testdata", "*"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no catalog fixtures (err %v)", err)
	}
	sched := "cat-fixtures"
	startPodGrouper(t, sched)
	var mine, theirs []string
	for _, dir := range dirs {
		f := catLoadFixture(t, filepath.Base(dir))
		if !catNeedsRealControllers(f) {
			theirs = append(theirs, f.name)
			continue
		}
		mine = append(mine, f.name)
		t.Run(f.name, func(t *testing.T) {
			begin := time.Now()
			ns := testNamespace(t, "cat-fx-")
			catReplay(t, ns, sched, f)
			replayed := time.Since(begin)
			catCheckFixture(t, f, ns)
			// Still exactly the fixture's pods once grouped.
			catAssertExactPods(t, ns, f, catCountKind(f, "ReplicaSet"))
			t.Logf("replayed in %s, grouped as expected %s later", replayed.Round(time.Millisecond), (time.Since(begin) - replayed).Round(time.Millisecond))
		})
	}
	t.Logf("replayed here with the real controllers and CRDs: %v", mine)
	t.Logf("replayed by TestPodGrouperCatalogFixtures: %v", theirs)
	for _, want := range []string{"deployment", "statefulset", "inferenceservice", "knative-service", "leaderworkerset", "llminferenceservice", "milvus", "nimservice", "trainjob"} {
		if !strings.Contains(","+strings.Join(mine, ",")+",", ","+want+",") {
			t.Errorf("fixture %s is not replayed here", want)
		}
	}
}

func catCountKind(f *catFixture, kind string) int {
	n := 0
	for _, o := range append([]*unstructured.Unstructured{f.root}, f.children...) {
		if o.GetKind() == kind {
			n++
		}
	}
	return n
}

// catScaleCase scales a replayed fixture's root and says what follows.
type catScaleCase struct {
	fixture string
	// patch is a JSON patch on the root.
	patch string
	// want: PodGroup → minMember, GPUs after the patch.
	want map[string][2]int64
	// alone: pods of the root (selector) and how many must be marked
	// gang-free after the patch (the controller made the new ones).
	selector string
	alone    int
}

// TestCatalogScaleAndDelete changes a replayed workload's replicas in the
// API and checks that the PodGroups follow, then deletes the workload and
// checks that its PodGroups and pods are garbage-collected.
func TestCatalogScaleAndDelete(t *testing.T) {
	cases := []catScaleCase{
		// Per-group gang: LWS group size 4 → 5 (no pod event: the operator
		// does not run here); both groups' PodGroups follow.
		{fixture: "leaderworkerset", patch: `[{"op":"replace","path":"/spec/leaderWorkerTemplate/size","value":5}]`,
			want: map[string][2]int64{"vllm-405b-group-0": {5, 40}, "vllm-405b-group-1": {5, 40}}},
		// Per-group gang of a multi-node NIM: pipeline size 2 → 3.
		{fixture: "nimservice", patch: `[{"op":"replace","path":"/spec/multiNode/parallelism/pipeline","value":3}]`,
			want: map[string][2]int64{"deepseek-r1-lws-group-0": {3, 24}, "deepseek-r1-lws-group-1": {3, 24}}},
		// Whole-workload gang: PyTorchJob workers 3 → 5.
		{fixture: "pytorchjob", patch: `[{"op":"replace","path":"/spec/pytorchReplicaSpecs/Worker/replicas","value":5}]`,
			want: map[string][2]int64{"bert-ddp": {6, 24}}},
		// Whole-workload gang: PyTorchJob workers 3 → 1 (scale down).
		{fixture: "pytorchjob", patch: `[{"op":"replace","path":"/spec/pytorchReplicaSpecs/Worker/replicas","value":1}]`,
			want: map[string][2]int64{"bert-ddp": {2, 8}}},
		// No gang, real controllers: Deployment 3 → 4; the ReplicaSet
		// controller makes the fourth pod, which is marked gang-free.
		{fixture: "deployment", patch: `[{"op":"replace","path":"/spec/replicas","value":4}]`,
			want: map[string][2]int64{}, selector: "app=vllm-qwen", alone: 4},
	}
	sched := "cat-scale"
	startPodGrouper(t, sched)
	for _, c := range cases {
		t.Run(c.fixture, func(t *testing.T) {
			ctx := context.Background()
			f := catLoadFixture(t, c.fixture)
			ns := testNamespace(t, "cat-sc-")
			r := catReplay(t, ns, sched, f)
			catCheckFixture(t, f, ns)

			begin := time.Now()
			ri, err := controlPlane.ResourceFor(r.root, ns)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ri.Patch(ctx, r.root.GetName(), types.JSONPatchType, []byte(c.patch), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			for name, mm := range c.want {
				pgrWaitPodGroup(t, ns, name, fmt.Sprintf("minMember %d, %d GPUs after %s", mm[0], mm[1], c.patch), func(pg *schedv1alpha1.PodGroup) bool {
					return int64(pg.Spec.MinMember) == mm[0] && catGPUs(pg) == mm[1]
				})
			}
			if c.selector != "" {
				pgrWaitPods(t, ns, c.selector, c.alone, "scheduled alone after the scale", pgrAlone(""))
			}
			if got := podGroupNames(t, ns); len(got) != len(c.want) {
				t.Errorf("PodGroups after scaling: %v, want %d", got, len(c.want))
			}
			t.Logf("scaled → PodGroups followed in %s", time.Since(begin).Round(time.Millisecond))

			begin = time.Now()
			if err := ri.Delete(ctx, r.root.GetName(), metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			// Pods go too: through the real controllers' owner chains, or
			// (custom kinds without their operator) straight to the root.
			catWaitCollected(t, ns, "")
			if _, err := ri.Get(ctx, r.root.GetName(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("root still there: %v", err)
			}
			t.Logf("deleted → PodGroups and pods collected in %s", time.Since(begin).Round(time.Millisecond))
		})
	}
}

// catWaitMembersUnschedulable waits until each of the n pods matching
// selector has PodScheduled=False/Unschedulable with every string of want
// (what kubectl describe pod shows a user); on timeout it names the pods
// that lack it and logs the namespace.
func catWaitMembersUnschedulable(t testing.TB, ns, selector string, n int, want []string) {
	t.Helper()
	_, err := controlPlane.WaitPods(context.Background(), ns, selector, n, gangTimeout, "Unschedulable with the gang's reason", func(p *corev1.Pod) bool {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable && containsAll(c.Message, want) {
				return true
			}
		}
		return false
	})
	if err != nil {
		catDumpNamespace(t, ns)
		t.Error(err)
	}
}

// catDumpNamespace logs the pods, PodGroups and events of ns.
func catDumpNamespace(t testing.TB, ns string) {
	t.Helper()
	ctx := context.Background()
	pods, err := controlPlane.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Errorf("listing the pods of %s: %v", ns, err)
	} else {
		for _, p := range pods.Items {
			t.Logf("pod %s node=%q labels=%v annotations=%v conditions=%+v", p.Name, p.Spec.NodeName, p.Labels, p.Annotations, p.Status.Conditions)
		}
	}
	l, err := podGroups(t).SchedulingV1alpha1().PodGroups(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Errorf("listing the PodGroups of %s: %v", ns, err)
	} else {
		for _, pg := range l.Items {
			t.Logf("PodGroup %s spec=%+v status=%+v", pg.Name, pg.Spec, pg.Status)
		}
	}
	evs, err := controlPlane.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Errorf("listing the events of %s: %v", ns, err)
	} else {
		for _, e := range evs.Items {
			t.Logf("event %s %s/%s: %s", e.Reason, e.Regarding.Kind, e.Regarding.Name, e.Note)
		}
	}
}

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/podgrouper"
)

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

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/localcluster"
)

// The no-silent-hang and true-status proofs of issue 14 (items 5 and 6): a
// pod sent to muster-scheduler that cannot be placed says why in its
// PodScheduled condition, and comes back when the cause is gone; a pod of
// another gang mechanism is refused with what to do; the yield event is
// not repeated by a new pod-grouper; a gang scaled down to what fits loses
// its old reason and binds, and describe never shows more bound than
// members.

// nhHold is how long a refused pod is watched staying unbound: the
// scheduler retries it at once when anything about it changes, so a bind
// would show up within the period.
const nhHold = 3 * time.Second

// nhJob is an Indexed Job of n pods × gpus GPUs on the pool ns, one gang
// through muster.io/min-member: minMember.
func nhJob(ns, name, sched string, n int, gpus int64, minMember string) *batchv1.Job {
	pod := makePod(ns, podSpec{name: name, scheduler: sched, pool: ns, gpus: gpus})
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{api.AnnotationMinMember: minMember}},
		Spec: batchv1.JobSpec{
			Parallelism:    ptr.To(int32(n)),
			Completions:    ptr.To(int32(n)),
			CompletionMode: ptr.To(batchv1.IndexedCompletion),
			Template:       corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: pod.Labels}, Spec: pod.Spec},
		},
	}
}

func nhCreateJob(t *testing.T, job *batchv1.Job) {
	t.Helper()
	if _, err := controlPlane.Client.BatchV1().Jobs(job.Namespace).Create(context.Background(), job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// nhScaleJob sets the Job's size (an elastic Indexed Job: parallelism and
// completions together) and, when minMember is not "", its min-member, in
// one patch, as a user scaling a gang would.
func nhScaleJob(t *testing.T, ns, name string, n int, minMember string) {
	t.Helper()
	patch := map[string]any{"spec": map[string]any{"parallelism": n, "completions": n}}
	if minMember != "" {
		patch["metadata"] = map[string]any{"annotations": map[string]any{api.AnnotationMinMember: minMember}}
	}
	data, err := json.Marshal(patch)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := controlPlane.Client.BatchV1().Jobs(ns).Patch(context.Background(), name, types.MergePatchType, data, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// nhJobPods selects the pods of Job name.
func nhJobPods(name string) string { return batchv1.JobNameLabel + "=" + name }

// nhPods is a Condition on the live pods of ns matching selector: there
// are n, and ok holds of each; seen lists what ok was given.
func nhPods(ns, selector string, n int, ok func(*corev1.Pod) (bool, string)) localcluster.Condition {
	return func(ctx context.Context) (bool, string, error) {
		l, err := controlPlane.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, "", err
		}
		var seen []string
		all, live := true, 0
		for i := range l.Items {
			p := &l.Items[i]
			if p.DeletionTimestamp != nil {
				continue
			}
			live++
			good, what := ok(p)
			all = all && good
			seen = append(seen, p.Name+": "+what)
		}
		return all && live == n, fmt.Sprintf("%d live pods (%s): %s", live, selector, strings.Join(seen, "; ")), nil
	}
}

// nhScheduled describes a pod's node and PodScheduled condition.
func nhScheduled(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return fmt.Sprintf("node %q, PodScheduled=%s %s: %s", p.Spec.NodeName, c.Status, c.Reason, c.Message)
		}
	}
	return fmt.Sprintf("node %q, no PodScheduled condition", p.Spec.NodeName)
}

// nhRefused holds of a pod the scheduler refused with a message holding
// every string of want.
func nhRefused(want ...string) func(*corev1.Pod) (bool, string) {
	return func(p *corev1.Pod) (bool, string) {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled {
				return p.Spec.NodeName == "" && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable && containsAll(c.Message, want), nhScheduled(p)
			}
		}
		return false, nhScheduled(p)
	}
}

func nhUnbound(p *corev1.Pod) (bool, string) { return p.Spec.NodeName == "", nhScheduled(p) }

// nhInGang holds of a bound pod labelled with a PodGroup and no marker.
func nhInGang(p *corev1.Pod) (bool, string) {
	_, marked := p.Annotations[api.AnnotationGrouping]
	return p.Spec.NodeName != "" && p.Labels[api.LabelPodGroup] != "" && !marked,
		fmt.Sprintf("label %q, annotations %v, %s", p.Labels[api.LabelPodGroup], p.Annotations, nhScheduled(p))
}

// TestNoHangHeldPodSaysWhy: a Job whose muster.io/min-member is not a
// number once waited in the scheduler's PreEnqueue with nothing on the pod
// but a Normal event. Now the pod-grouper marks its pods waiting with the
// cause, the scheduler refuses them with it in PodScheduled=False (reason
// Unschedulable, what cluster autoscalers read), and fixing the annotation
// groups and binds them without any other nudge.
func TestNoHangHeldPodSaysWhy(t *testing.T) {
	ns, sched := gangTest(t, "nohang-held-", 2, 4, nil)
	startPodGrouper(t, sched)
	nhCreateJob(t, nhJob(ns, "bad", sched, 2, 1, "abc"))
	sel := nhJobPods("bad")
	waitFor(t, localcluster.ShortTimeout, "the pods of Job bad marked waiting and refused with the cause",
		nhPods(ns, sel, 2, func(p *corev1.Pod) (bool, string) {
			refused, seen := nhRefused(api.AnnotationMinMember, `"abc"`)(p)
			marked := p.Annotations[api.AnnotationGrouping] == api.GroupingWaiting &&
				strings.Contains(p.Annotations[api.AnnotationGroupingReason], api.AnnotationMinMember)
			return refused && marked && p.Labels[api.LabelPodGroup] == "", fmt.Sprintf("annotations %v, %s", p.Annotations, seen)
		}))
	holdsFor(t, nhHold, "no pod of Job bad bound while its gang cannot be computed", nhPods(ns, sel, 2, nhUnbound))

	nhScaleJob(t, ns, "bad", 2, "2")
	waitFor(t, localcluster.ShortTimeout, "the pods of Job bad grouped and bound once the annotation is fixed", nhPods(ns, sel, 2, nhInGang))
}

// TestNoHangForeignGang: a pod for muster-scheduler that belongs to a
// Volcano or KAI PodGroup once waited forever for a pod-group label the
// pod-grouper never writes. Now the scheduler refuses it with what to do;
// the pod-grouper's yield event is recorded once, not again by a new
// pod-grouper process; and removing the annotation lets muster group and
// schedule the pod.
func TestNoHangForeignGang(t *testing.T) {
	ctx := context.Background()
	ns, sched := gangTest(t, "nohang-foreign-", 1, 4, nil)
	grouper := startPodGrouper(t, sched)
	cases := []struct {
		name, key, group string
		want             []string
	}{
		{"vc", api.AnnotationVolcanoGroup, "vc-group", []string{
			"pod belongs to a Volcano PodGroup (annotation " + api.AnnotationVolcanoGroup + "=vc-group)",
			"does not schedule Volcano's gangs", "set schedulerName to Volcano's scheduler", "remove the annotation"}},
		{"kai", api.AnnotationKAIGroup, "kai-group", []string{
			"pod belongs to a KAI Scheduler PodGroup (annotation " + api.AnnotationKAIGroup + "=kai-group)", "remove the annotation"}},
	}
	uids := map[string]types.UID{}
	for _, c := range cases {
		p, err := controlPlane.Client.CoreV1().Pods(ns).Create(ctx, makePod(ns, podSpec{name: c.name, scheduler: sched, pool: ns, gpus: 1,
			annotations: map[string]string{c.key: c.group}}), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		uids[c.name] = p.UID
	}
	for _, c := range cases {
		waitFor(t, localcluster.ShortTimeout, "pod "+c.name+" refused with what to do",
			nhPods(ns, "", len(cases), func(p *corev1.Pod) (bool, string) {
				if p.Name != c.name {
					return true, ""
				}
				return nhRefused(c.want...)(p)
			}))
	}
	yields := func(ctx context.Context) (bool, string, error) {
		evs, err := controlPlane.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=GangManagedElsewhere"})
		if err != nil {
			return false, "", err
		}
		count := map[string]int32{}
		for _, e := range evs.Items {
			count[e.InvolvedObject.Name] += max(e.Count, 1)
			if e.InvolvedObject.UID != uids[e.InvolvedObject.Name] {
				return false, "", fmt.Errorf("yield event about %s (uid %s), not one of the test's pods", e.InvolvedObject.Name, e.InvolvedObject.UID)
			}
		}
		ok := len(count) == len(cases)
		for _, n := range count {
			ok = ok && n == 1
		}
		return ok, fmt.Sprintf("yield events per pod %v", count), nil
	}
	waitFor(t, localcluster.ShortTimeout, "one yield event per foreign pod", yields)

	// A new pod-grouper process goes over every pod again. A pod created
	// after it started and grouped shows it went through its queue (the
	// pods before it were queued first).
	grouper.stop()
	startPodGrouper(t, sched)
	if _, err := controlPlane.Client.CoreV1().Pods(ns).Create(ctx, makePod(ns, podSpec{name: "control", scheduler: sched, pool: ns, gpus: 1}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, localcluster.ShortTimeout, "the control pod marked by the new pod-grouper and bound", objectIs(controlPlane.Client.CoreV1().Pods(ns), "control", func(p *corev1.Pod) (bool, string) {
		return api.ScheduledAlone(p.Annotations) && p.Spec.NodeName != "", fmt.Sprintf("annotations %v, %s", p.Annotations, nhScheduled(p))
	}))
	holdsFor(t, nhHold, "still one yield event per foreign pod after the restart", yields)

	// The annotation goes: the pod is muster's (a bare Pod: scheduled alone).
	patch := []byte(`{"metadata":{"annotations":{"` + api.AnnotationVolcanoGroup + `":null}}}`)
	if _, err := controlPlane.Client.CoreV1().Pods(ns).Patch(ctx, "vc", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, localcluster.ShortTimeout, "pod vc scheduled once its Volcano annotation is gone", objectIs(controlPlane.Client.CoreV1().Pods(ns), "vc", func(p *corev1.Pod) (bool, string) {
		return api.ScheduledAlone(p.Annotations) && p.Spec.NodeName != "", fmt.Sprintf("annotations %v, %s", p.Annotations, nhScheduled(p))
	}))
	holdsFor(t, nhHold, "pod kai still refused", nhPods(ns, "", len(cases)+1, func(p *corev1.Pod) (bool, string) {
		if p.Name != "kai" {
			return true, ""
		}
		return nhRefused(cases[1].want...)(p)
	}))
}

// TestNoHangStatusFollowsScaling: a gang Job refused for lack of room and
// scaled down to what fits once kept the reason of its old size and waited
// minutes; scaled up past its min-member, describe showed BOUND 4/3. Now
// the scale-down binds it at once and drops the reason, the PodGroup's
// counts follow, and describe's bound never exceeds the members.
func TestNoHangStatusFollowsScaling(t *testing.T) {
	ns, sched := gangTest(t, "nohang-scale-", 2, 4, nil)
	startPodGrouper(t, sched)
	// 5 × 2 GPUs on 2 nodes of 4: 10 needed, 8 there.
	nhCreateJob(t, nhJob(ns, "train", sched, 5, 2, "5"))
	sel := nhJobPods("train")
	waitFor(t, localcluster.ShortTimeout, "the 5 members of Job train refused for lack of room", nhPods(ns, sel, 5, nhRefused("for 5 members")))
	if d := describeJSON(t, ns, "job/train"); len(d.Gangs) != 1 || !strings.Contains(d.Gangs[0].Reason, "for 5 members") {
		t.Fatalf("describe gangs %+v; want one refused for 5 members", d.Gangs)
	}

	// Scaled down to 3: 6 GPUs fit.
	nhScaleJob(t, ns, "train", 3, "3")
	waitFor(t, localcluster.ShortTimeout, "the 3 members of Job train bound after the scale-down", nhPods(ns, sel, 3, nhInGang))
	pgName := nhCheckDescribe(t, ns, "job/train", 3, 3, 3, "3/3")
	nhWaitPodGroupStatus(t, ns, pgName, 3, 3)

	// Scaled up to 4, min-member 3: the fourth member fits too.
	nhScaleJob(t, ns, "train", 4, "")
	waitFor(t, localcluster.ShortTimeout, "the 4 members of Job train bound after the scale-up", nhPods(ns, sel, 4, nhInGang))
	nhCheckDescribe(t, ns, "job/train", 3, 4, 4, "4/4")
	nhWaitPodGroupStatus(t, ns, pgName, 3, 4)
}

// nhCheckDescribe waits until describe shows the workload's one gang with
// minMember, bound of pods members, no reason, and cell in the BOUND
// column of the table; it returns the gang's PodGroup.
func nhCheckDescribe(t *testing.T, ns, ref string, minMember int32, bound, pods int, cell string) string {
	t.Helper()
	var name string
	waitFor(t, localcluster.ShortTimeout, fmt.Sprintf("describe %s: minMember %d, %d of %d bound, no reason", ref, minMember, bound, pods), func(context.Context) (bool, string, error) {
		d := describeJSON(t, ns, ref)
		if len(d.Gangs) != 1 {
			return false, fmt.Sprintf("gangs %+v", d.Gangs), nil
		}
		g := d.Gangs[0]
		name = g.Name
		if g.Bound > g.Pods {
			return false, "", fmt.Errorf("describe %s: %d bound of %d members: %+v", ref, g.Bound, g.Pods, g)
		}
		return g.MinMember == minMember && g.Bound == bound && g.Pods == pods && g.Reason == "" && g.PodGroupFound, fmt.Sprintf("gang %+v", g), nil
	})
	out, errOut, code := muster(t, "describe", ref, "-n", ns, "--color", "never")
	if code != 0 {
		t.Fatalf("muster describe %s: exit %d: %s", ref, code, errOut)
	}
	row := ""
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == name {
			row = line
		}
	}
	if f := strings.Fields(row); len(f) < 3 || f[1] != strconv.Itoa(int(minMember)) || f[2] != cell {
		t.Errorf("describe %s: gang row %q, want MIN-MEMBER %d and BOUND %s:\n%s", ref, row, minMember, cell, out)
	}
	return name
}

// nhWaitPodGroupStatus waits until PodGroup ns/name has minMember and
// its status counts running members and says Running.
func nhWaitPodGroupStatus(t *testing.T, ns, name string, minMember, running int32) {
	t.Helper()
	pgrWaitPodGroup(t, ns, name, fmt.Sprintf("minMember %d, %d running, phase Running", minMember, running), func(pg *schedv1alpha1.PodGroup) bool {
		return pg.Spec.MinMember == minMember && pg.Status.Running == running && pg.Status.Phase == schedv1alpha1.PodGroupRunning
	})
}

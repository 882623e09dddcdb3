package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/cli"
	"github.com/muster-io/muster/internal/naming"
	"github.com/muster-io/muster/localcluster"
)

// nativeJobSet creates a JobSet of one leader and two workers, each pod
// asking for gpus GPUs and scheduled by sched, in native mode as the
// pod-grouper and its webhook leave it (made by hand here: neither runs in
// this binary): a native PodGroup of minCount 3 named
// naming.NativePodGroupName with the contract's labels and an owner
// reference to the JobSet (none when withPG is false), and the pods of
// its Jobs naming it in spec.schedulingGroup. The Jobs are managed by a
// stand-in, so the Job controller leaves the pods to the test. It returns
// the PodGroup's name.
func nativeJobSet(t *testing.T, ns, name, sched string, gpus int, withPG bool) string {
	t.Helper()
	ctx := context.Background()
	js := createJobSetWorkload(t, jobSet(ns, name, ns, sched, "", 2, gpus), "", 0, "muster.io/e2e-stand-in")
	pg := naming.NativePodGroupName(name, string(js.GetUID()), nil, "jobset", nil)
	if withPG {
		_, err := controlPlane.Client.SchedulingV1beta1().PodGroups(ns).Create(ctx, &schedulingv1beta1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Name: pg, Labels: map[string]string{
				api.LabelWorkloadKind: "JobSet", api.LabelWorkloadName: name, api.LabelWorkloadUID: string(js.GetUID()), api.LabelDefinition: "jobset"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: js.GetAPIVersion(), Kind: "JobSet", Name: name, UID: js.GetUID()}}},
			Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
				Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 3}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	jobs, err := controlPlane.Client.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{LabelSelector: "jobset.sigs.k8s.io/jobset-name=" + name})
	if err != nil || len(jobs.Items) != 3 {
		t.Fatalf("jobs of %s: %v (%d)", name, err, len(jobs.Items))
	}
	for _, job := range jobs.Items {
		labels := map[string]string{"batch.kubernetes.io/job-completion-index": "0"}
		for k, v := range job.Spec.Template.Labels {
			// Not the (empty) scheduler-plugins label of the template:
			// native pods carry none.
			if k != api.LabelPodGroup {
				labels[k] = v
			}
		}
		spec := *job.Spec.Template.Spec.DeepCopy()
		spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptrTo(pg)}
		_, err := controlPlane.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: job.Name + "-0-x", Labels: labels,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptrTo(true)}}},
			Spec: spec,
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	return pg
}

// nativeGang is the one gang describe shows for a workload, as JSON.
func nativeGang(t *testing.T, ns, name string) cli.GangView {
	t.Helper()
	d := describeJSON(t, ns, "jobset/"+name)
	if len(d.Gangs) != 1 || !d.Gangs[0].Native || d.Gangs[0].NativePodGroup == nil {
		t.Fatalf("%s: gangs %+v; want one native gang", name, d.Gangs)
	}
	return d.Gangs[0]
}

// fitNativeGang runs muster fit on a workload and returns its one gang.
func fitNativeGang(t *testing.T, ns, name string) cli.GangFit {
	t.Helper()
	out, errOut, code := muster(t, "fit", "jobset/"+name, "-n", ns, "-o", "json")
	if code != 0 {
		t.Fatalf("muster fit jobset/%s: exit %d: %s", name, code, errOut)
	}
	var r cli.FitReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("fit output is not JSON: %v\n%s", err, out)
	}
	w := r.Clusters[0].Workloads[0]
	if w.Source != "live" || len(w.Gangs) != 1 {
		t.Fatalf("fit jobset/%s: source %s, gangs %+v; want live and one gang", name, w.Source, w.Gangs)
	}
	return w.Gangs[0]
}

// TestCLINativeGangs: native PodGroups and their pods on the real API
// server, placed by the in-tree GangScheduling plugin (muster-scheduler
// hands native gangs to it). describe shows each gang by its native
// PodGroup, members scheduled and ready, and the scheduler's reason while
// pending; fit answers for a pending native gang; get counts them.
//
// On 4 nodes × 4 GPUs: "fits" (3 × 4 GPUs) binds whole; "big" (3 × 8
// GPUs) can never fit, and the scheduler says so on its PodGroup;
// "waiting" (3 × 1 GPU) names a scheduler that does not run, so it stays
// pending untried and fits in what is left; "orphan" names a PodGroup
// that does not exist, and the scheduler holds its pods.
func TestCLINativeGangs(t *testing.T) {
	ns, sched := gangTest(t, "cli-native-", 4, 4, nil)
	ctx := context.Background()
	fitsPG := nativeJobSet(t, ns, "fits", sched, 4, true)
	bigPG := nativeJobSet(t, ns, "big", sched, 8, true)
	nativeJobSet(t, ns, "waiting", "nobody-"+ns, 1, true)
	orphanPG := nativeJobSet(t, ns, "orphan", sched, 1, false)

	if _, err := controlPlane.WaitPods(ctx, ns, "jobset.sigs.k8s.io/jobset-name=fits", 3, localcluster.LongTimeout, "ready", podutil.IsPodReady); err != nil {
		t.Fatal(err)
	}
	var cond *metav1.Condition
	waitFor(t, localcluster.LongTimeout, "PodGroupInitiallyScheduled=False on "+bigPG, func(ctx context.Context) (bool, string, error) {
		pg, err := controlPlane.Client.SchedulingV1beta1().PodGroups(ns).Get(ctx, bigPG, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		cond = apimeta.FindStatusCondition(pg.Status.Conditions, schedulingv1beta1.PodGroupInitiallyScheduled)
		return cond != nil && cond.Status == metav1.ConditionFalse && cond.Message != "", fmt.Sprintf("condition %+v", cond), nil
	})

	g := nativeGang(t, ns, "fits")
	if g.Name != fitsPG || !g.PodGroupFound || g.MinMember != 3 || g.Bound != 3 || g.Phase != "Scheduled" || g.Reason != "" ||
		g.NativePodGroup.Summary != "3 of 3 members scheduled, 3 ready" {
		t.Errorf("fits: gang %+v, native %+v; want %s, minCount 3, 3 of 3 scheduled and ready, Scheduled, no reason", g, g.NativePodGroup, fitsPG)
	}

	g = nativeGang(t, ns, "big")
	if g.Name != bigPG || g.Bound != 0 || g.Phase != schedulingv1beta1.PodGroupReasonUnschedulable || !strings.Contains(g.Reason, cond.Message) ||
		g.NativePodGroup.InitiallyScheduled == nil || g.NativePodGroup.Summary != "0 of 3 members scheduled, 0 ready" {
		t.Errorf("big: gang %+v, native %+v; want %s, none scheduled, Unschedulable, the condition's message %q", g, g.NativePodGroup, bigPG, cond.Message)
	}
	t.Logf("big: reason %q", g.Reason)
	out, errOut, code := muster(t, "describe", "jobset/big", "-n", ns, "--color", "never")
	if code != 0 || !strings.Contains(out, bigPG) || !strings.Contains(out, "native") || !strings.Contains(out, "0 of 3 members scheduled, 0 ready") {
		t.Errorf("describe jobset/big (exit %d, %s) does not show the native gang:\n%s", code, errOut, out)
	}
	t.Logf("muster describe jobset/big:\n%s", out)

	g = nativeGang(t, ns, "orphan")
	if g.Name != orphanPG || g.PodGroupFound || !strings.Contains(g.Reason, "native PodGroup "+orphanPG+" not found") {
		t.Errorf("orphan: gang %+v; want %s not found", g, orphanPG)
	}

	// fit: the pending native gangs, at the PodGroup's minCount with the
	// pods naming it.
	f := fitNativeGang(t, ns, "waiting")
	if !f.Native || f.Verdict != "fits now" || f.MinMember != 3 || f.Members != 3 || len(f.Assignments) != 3 {
		t.Errorf("fit waiting: %+v; want a native gang of minCount 3 that fits now, 3 members placed", f)
	}
	f = fitNativeGang(t, ns, "big")
	if !f.Native || f.Verdict != "does not fit" || f.PodGroup != bigPG || f.MinMember != 3 || f.Members != 3 {
		t.Errorf("fit big: %+v; want the native gang %s, minCount 3, does not fit", f, bigPG)
	}
	f = fitNativeGang(t, ns, "orphan")
	if f.Verdict != "does not fit" || !strings.Contains(f.Reason, "not found") {
		t.Errorf("fit orphan: %+v; want does not fit, PodGroup not found", f)
	}

	out, errOut, code = muster(t, "get", "jobsets", "-n", ns, "-o", "json")
	var l cli.WorkloadList
	if code != 0 || json.Unmarshal([]byte(out), &l) != nil {
		t.Fatalf("get: exit %d, %s\n%s", code, errOut, out)
	}
	rows := map[string]cli.WorkloadRow{}
	for _, r := range l.Items {
		rows[r.Name] = r
	}
	if r := rows["fits"]; r.NativeGangs != 1 || r.Gangs != 1 || r.GangsBound != 1 {
		t.Errorf("get fits: %+v; want 1 native gang, bound", r)
	}
	if r := rows["big"]; r.NativeGangs != 1 || r.GangsBound != 0 || r.GangsUnschedulable != 1 {
		t.Errorf("get big: %+v; want 1 native gang, unschedulable", r)
	}
}

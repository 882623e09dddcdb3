package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/muster-io/muster/cli"
	"github.com/muster-io/muster/localcluster"
)

// `muster fit` on a cluster full of lower-priority gangs, against what
// muster-scheduler's whole-gang preemption then does: fit names the units
// it would evict, the scheduler evicts exactly those (their members are
// gone, the other gangs keep theirs, its Preempting event names the same
// units) and binds the gang where fit placed it. Both run the same search
// (plugins/gang/victims) on the same cluster, so they must agree.

// fitPriorityJob is fitJob with its pods at priority class pc.
func fitPriorityJob(t *testing.T, ns, name, sched string, members, gpus int, pc string) []byte {
	t.Helper()
	var job batchv1.Job
	if err := json.Unmarshal(fitJob(ns, name, sched, members, gpus, nil), &job); err != nil {
		t.Fatal(err)
	}
	job.Spec.Template.Spec.PriorityClassName = pc
	data, err := json.Marshal(&job)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// fitVictimUnits are fit's victims as the plugin names them, sorted.
func fitVictimUnits(g cli.GangFit) []string {
	var out []string
	for _, v := range g.Victims {
		out = append(out, v.Unit)
	}
	sort.Strings(out)
	return out
}

// jobPodName waits for a pod of the Job and returns its name.
func jobPodName(t *testing.T, ns, job string) string {
	t.Helper()
	var name string
	waitFor(t, gangTimeout, "a pod of job "+job, func(ctx context.Context) (bool, string, error) {
		pods, err := controlPlane.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + job})
		if err != nil || len(pods.Items) == 0 {
			return false, "no pod yet", err
		}
		names := make([]string, 0, len(pods.Items))
		for _, p := range pods.Items {
			names = append(names, p.Name)
		}
		sort.Strings(names)
		name = names[0]
		return true, "", nil
	})
	return name
}

// TestFitPreemptAgrees: four 4-GPU nodes full of four gangs of 4 × 1 GPU,
// two at priority 20 and two at 10. A Job of 8 × 1 GPU at 1000 fits only
// after preempting; fit names the two priority-10 gangs (the cheapest whole
// units that make room for 8), and the scheduler, given the Job, evicts
// exactly their pods, leaves the priority-20 gangs alone and binds the Job
// on the nodes fit chose.
func TestFitPreemptAgrees(t *testing.T) {
	ns, sched := fitSetup(t, "fit-pre-", 4, func(int) localcluster.NodeSpec { return localcluster.NodeSpec{GPUs: 4} })
	low := preClass(t, ns+"-low", 10, false)
	mid := preClass(t, ns+"-mid", 20, false)
	high := preClass(t, ns+"-high", 1000, false)
	gangs := []string{"mid-a", "mid-b", "low-a", "low-b"}
	mins := map[string]int{}
	for _, g := range gangs {
		mins[g] = 4
	}
	w := watchPreemption(t, ns, mins)
	for _, g := range gangs {
		pc := low
		if strings.HasPrefix(g, "mid") {
			pc = mid
		}
		preSetGang(t, ns, sched, g, 4, 1, pc)
	}
	for _, g := range gangs {
		waitGangBound(t, ns, g, 4, gangTimeout)
	}
	w.seenWhole(t, gangs...)
	before := boundUIDs(t, ns)

	data := fitPriorityJob(t, ns, "urgent", sched, 8, 1, high)
	r := runFit(t, "-f", fitFile(t, data))
	g := fitOnlyGang(t, r)
	wantUnits := []string{"gang " + ns + "/low-a", "gang " + ns + "/low-b"}
	if g.Verdict != "fits after preempting" || g.Fits || !g.FitsAfterPreempting || g.Priority == nil || *g.Priority != 1000 || g.PriorityClass != high {
		t.Fatalf("fit: verdict %q (priority %v, class %q, reason %q, preemption %q); want fits after preempting at 1000 (%s)", g.Verdict, g.Priority, g.PriorityClass, g.Reason, g.Preemption, high)
	}
	if got := fitVictimUnits(g); !slices.Equal(got, wantUnits) {
		t.Fatalf("fit's victims %v; want %v (the priority-10 gangs, whole)", got, wantUnits)
	}
	for _, v := range g.Victims {
		if v.Kind != "gang" || v.Mechanism != "muster" || v.Pods != 4 || v.GPUs != 4 || v.Priority != 10 {
			t.Errorf("victim %+v; want a muster gang of 4 pods, 4 GPUs, priority 10", v)
		}
	}
	if c := r.Clusters[0]; c.Verdict != "fits after preempting" || c.VictimPods != 8 || c.VictimUnits != 2 {
		t.Errorf("cluster verdict %q, %d victim units of %d pods; want fits after preempting, 2 units of 8 pods", c.Verdict, c.VictimUnits, c.VictimPods)
	}
	if len(g.Assignments) != 8 {
		t.Fatalf("fit placed %d members after preempting, want 8", len(g.Assignments))
	}

	// The scheduler, given the Job.
	begin := time.Now()
	applyYAML(t, ns, string(data))
	// Not waitOutcome: the gang is refused (GangUnschedulable) before it
	// preempts, and bound once its victims are gone.
	pods, err := controlPlane.WaitPodsBound(context.Background(), ns, batchv1.JobNameLabel+"=urgent", 8, preemptTimeout)
	if err != nil {
		t.Fatalf("the Job fit said fits after preempting: %v", err)
	}
	t.Logf("Job of 8 bound %s after it was submitted", time.Since(begin).Round(time.Millisecond))
	nodes := fitGangNodes{}
	for _, p := range pods {
		nodes[p.Spec.NodeName]++
	}
	if nodes.String() != fitNodes(g).String() {
		t.Errorf("fit placed %s after preempting, the scheduler bound %s", fitNodes(g), nodes)
	}
	after := boundUIDs(t, ns)
	evicted := map[string]bool{}
	for _, v := range g.Victims {
		evicted[v.Name] = true
	}
	for _, gang := range gangs {
		for _, uid := range before[gang] {
			if still := slices.Contains(after[gang], uid); still == evicted[gang] {
				t.Errorf("gang %s (fit evicts it: %v): member %s bound after the preemption: %v", gang, evicted[gang], uid, still)
			}
		}
	}
	waitEvent(t, ns, "PodGroup", "urgent", "Preempting", wantUnits)
	w.check(t)
}

// TestFitPreemptWouldNotHelp: two 4-GPU nodes full of two gangs at priority
// 10. A Job at the same priority does not fit (nothing it may preempt), nor
// does one at 1000 that needs three 4-GPU members (two nodes: no room even
// with everything evicted). fit says so in the scheduler's words; the
// scheduler, given each Job, says the same and evicts nothing.
func TestFitPreemptWouldNotHelp(t *testing.T) {
	ns, sched := fitSetup(t, "fit-pre-no-", 2, func(int) localcluster.NodeSpec { return localcluster.NodeSpec{GPUs: 4} })
	low := preClass(t, ns+"-low", 10, false)
	high := preClass(t, ns+"-high", 1000, false)
	w := watchPreemption(t, ns, map[string]int{"a": 4, "b": 4})
	preSetGang(t, ns, sched, "a", 4, 1, low)
	preSetGang(t, ns, sched, "b", 4, 1, low)
	waitGangBound(t, ns, "a", 4, gangTimeout)
	waitGangBound(t, ns, "b", 4, gangTimeout)
	w.seenWhole(t, "a", "b")
	before := boundUIDs(t, ns)

	for _, tc := range []struct {
		job, pc      string
		members, gpu int
		want         string
	}{
		// Alone on the control plane the words are "no running pod has a
		// lower priority"; pods other tests left at priority 0 on their
		// own nodes count as lower-priority pods for fit and the
		// scheduler alike, so only the start is pinned here.
		{job: "same", pc: low, members: 4, gpu: 1, want: "gang " + ns + "/same: preemption would not help: "},
		{job: "big", pc: high, members: 3, gpu: 4, want: "gang " + ns + "/big: preemption would not help: the gang would not fit even after evicting all "},
	} {
		data := fitPriorityJob(t, ns, tc.job, sched, tc.members, tc.gpu, tc.pc)
		g := fitOnlyGang(t, runFit(t, "-f", fitFile(t, data)))
		if g.Verdict != "does not fit" || g.FitsAfterPreempting || len(g.Victims) != 0 || !strings.HasPrefix(g.Preemption, tc.want) {
			t.Fatalf("fit %s: verdict %q, victims %v, preemption %q; want does not fit, none, %q", tc.job, g.Verdict, fitVictimUnits(g), g.Preemption, tc.want)
		}
		applyYAML(t, ns, string(data))
		c := waitUnschedulable(t, ns, jobPodName(t, ns, tc.job), g.Preemption, preemptTimeout)
		t.Logf("%s: fit and the scheduler: %s", tc.job, c.Message)
		holdsFor(t, 2*time.Second, "the priority-10 gangs untouched and job "+tc.job+" unbound", jobUnboundAnd(ns, tc.job, gangsUntouched(ns, before, "a", "b")))
	}
	w.check(t)
}

// jobUnboundAnd holds while no pod of the Job is bound and cond holds.
func jobUnboundAnd(ns, job string, cond localcluster.Condition) localcluster.Condition {
	return func(ctx context.Context) (bool, string, error) {
		pods, err := controlPlane.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + job})
		if err != nil {
			return false, "", err
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				return false, fmt.Sprintf("pod %s bound to %s", p.Name, p.Spec.NodeName), nil
			}
		}
		return cond(ctx)
	}
}

package gang

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// The informer's lister loses a deleted victim before the scheduler's cache
// and snapshot do. A member whose planned node still holds the victims in
// the snapshot waits: its gang neither plans again (dropping the room other
// gangs count as held) nor preempts a second time, and the victims'
// recreated pods, at their lower priority, find the room held until the
// preemptor's members take it.
func TestPreemptionWaitsForVictimsInSnapshot(t *testing.T) {
	var running, pending []*v1.Pod
	for i := range 4 {
		running = append(running, gpuPod("low-"+string(rune('a'+i)), 1, inGang("low"), prio(1), boundTo("n1")))
		running = append(running, gpuPod("mid-"+string(rune('a'+i)), 1, inGang("mid"), prio(5), boundTo("n2")))
	}
	for _, p := range running {
		p.Status.Phase = v1.PodRunning
	}
	var hi, again []*v1.Pod
	for i := range 4 {
		hi = append(hi, gpuPod("hi-"+string(rune('a'+i)), 1, inGang("hi"), prio(100)))
		// What the victims' workload controller recreates.
		again = append(again, gpuPod("low2-"+string(rune('a'+i)), 1, inGang("low2"), prio(1)))
	}
	pending = append(append(pending, hi...), again...)
	e := newPreemptEnv(t, []*v1.Node{gpuNode("n1", 4), gpuNode("n2", 4)},
		[]*schedv1alpha1.PodGroup{podGroup("low", 4), podGroup("mid", 4), podGroup("hi", 4), podGroup("low2", 4)}, running, pending)

	state := framework.NewCycleState()
	if _, st := e.pl.PreFilter(e.ctx, state, hi[0], nil); st.Code() != fwk.UnschedulableAndUnresolvable {
		t.Fatalf("PreFilter on a full cluster: %v, want no placement", st)
	}
	if _, st := e.pl.PostFilter(e.ctx, state, hi[0], nil); !st.IsSuccess() || !strings.Contains(st.Message(), "gang ns/low") {
		t.Fatalf("first PostFilter: %v, want the low gang preempted", st)
	}
	deleted := func() []string {
		var names []string
		for _, a := range e.cs.Actions() {
			if a.GetVerb() == "delete" {
				names = append(names, a.(interface{ GetName() string }).GetName())
			}
		}
		return names
	}
	// The executor deletes asynchronously.
	if err := wait.PollUntilContextTimeout(e.ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return len(deleted()) >= 4, nil
	}); err != nil {
		t.Fatalf("victims not deleted: %v (deleted %v)", err, deleted())
	}
	// The informer has seen the deletes; the snapshot has not.
	for _, p := range running {
		if strings.HasPrefix(p.Name, "low-") {
			if err := e.podStore.Delete(p); err != nil {
				t.Fatal(err)
			}
		}
	}
	lowPlanned := func(when string) {
		t.Helper()
		st := framework.NewCycleState()
		if _, s := e.pl.PreFilter(e.ctx, st, again[0], nil); s.IsSuccess() {
			t.Errorf("%s: the victims' recreated gang planned into the room freed for hi", when)
		}
		if _, s := e.pl.PostFilter(e.ctx, st, again[0], nil); s.IsSuccess() {
			t.Errorf("%s: the victims' recreated gang preempted: %v", when, s)
		}
	}
	for _, m := range hi[1:] {
		state := framework.NewCycleState()
		_, st := e.pl.PreFilter(e.ctx, state, m, nil)
		if st.Code() != fwk.UnschedulableAndUnresolvable || !strings.Contains(st.Message(), "waiting for 4 of 4 victim pods") {
			t.Fatalf("PreFilter of %s while the snapshot holds the victims: %v, want the wait", m.Name, st)
		}
		if _, st := e.pl.PostFilter(e.ctx, state, m, nil); st.IsSuccess() || !strings.Contains(st.Message(), "waiting for") {
			t.Errorf("PostFilter of %s while the snapshot holds the victims: %v, want the wait, no new preemption", m.Name, st)
		}
	}
	lowPlanned("while the snapshot holds the victims")

	// The snapshot catches up: hi is steered to the room made, which the
	// recreated gang still finds held.
	n1, err := e.fh.SnapshotSharedLister().NodeInfos().Get("n1")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range running {
		if strings.HasPrefix(p.Name, "low-") {
			if err := n1.RemovePod(klog.Background(), p); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, m := range hi {
		res, st := e.pl.PreFilter(e.ctx, framework.NewCycleState(), m, nil)
		if !st.IsSuccess() || res.AllNodes() || !res.NodeNames.Has("n1") {
			t.Errorf("%s once the victims are gone: %v %v, want steered to n1", m.Name, res, st)
		}
	}
	lowPlanned("once the victims are gone")

	for _, name := range deleted() {
		if !strings.HasPrefix(name, "low-") {
			t.Errorf("%s deleted: only the first preemption's victims may go", name)
		}
	}
}

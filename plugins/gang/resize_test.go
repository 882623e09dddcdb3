package gang

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	fwk "k8s.io/kube-scheduler/framework"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

func gangVerdict(e *barrierEnv, gang string) string {
	return e.pl.gangs.Inspect(types.NamespacedName{Namespace: "ns", Name: gang}).Verdict
}

// A gang refused for lack of room and then scaled down to what fits is
// planned at once: the refusal counted the old minMember, and was kept
// until it expired while the members, back in the unschedulable pool, kept
// its message.
func TestResizedGangPlansAgain(t *testing.T) {
	pods := members("g", 3, 2)
	pg := podGroup("g", 3)
	e := newBarrierEnv(t, []*v1.Node{gpuNode("n1", 4)}, []*schedv1alpha1.PodGroup{pg}, pods)
	if st, _ := e.schedule(pods[0]); st.Code() != fwk.UnschedulableAndUnresolvable || !strings.Contains(st.Message(), "for 3 members") {
		t.Fatalf("3 × 2 GPUs on 4: %v, want no placement", st)
	}
	e.act.take()
	// The pod-grouper scales the PodGroup down; the plugin's informer
	// delivers the change.
	resized := pg.DeepCopy()
	resized.Generation++
	resized.Spec.MinMember = 2
	if _, err := e.pl.pgClient.SchedulingV1alpha1().PodGroups("ns").Update(e.ctx, resized, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(e.ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		cur := e.pl.podGroup(types.NamespacedName{Namespace: "ns", Name: "g"})
		return cur != nil && cur.Spec.MinMember == 2 && gangVerdict(e, "g") == "", nil
	}); err != nil {
		t.Fatalf("minMember 2 not seen, or the verdict %q kept after it: %v", gangVerdict(e, "g"), err)
	}
	if got, want := e.act.take(), []string{"g-a", "g-b", "g-c"}; !slices.Equal(got, want) {
		t.Errorf("activated %v, want the members %v", got, want)
	}
	// Two of the three members fit; the plan may leave out any one of
	// them, which then hears "placed without this member". One of the
	// others is planned and waits at Permit.
	var got []string
	for _, p := range pods {
		st, _ := e.schedule(p)
		if st.IsWait() {
			return
		}
		got = append(got, st.Message())
	}
	t.Errorf("after the scale-down no member was planned and waiting at Permit: %q", got)
}

// A refused gang that loses or gains a member is planned again, so its
// reason counts the members it has.
func TestMembershipChangeRefreshesRefusal(t *testing.T) {
	pods := members("g", 3, 2)
	e := newBarrierEnv(t, []*v1.Node{gpuNode("n1", 4)}, []*schedv1alpha1.PodGroup{podGroup("g", 3)}, pods)
	if st, _ := e.schedule(pods[0]); !strings.Contains(st.Message(), "needs 6 nvidia.com/gpu for 3 members") {
		t.Fatalf("3 × 2 GPUs on 4: %v, want no placement for 6 GPUs", st)
	}
	e.act.take()

	// A member goes: the refusal goes, the others are woken; PreEnqueue
	// now holds them for the quorum.
	if err := e.pl.podIndexer.Delete(pods[2]); err != nil {
		t.Fatal(err)
	}
	e.pl.onPodDelete(pods[2])
	if v := gangVerdict(e, "g"); v != "" {
		t.Errorf("verdict %q kept after a member left", v)
	}
	if got, want := e.act.take(), []string{"g-a", "g-b"}; !slices.Equal(got, want) {
		t.Errorf("activated %v, want the pending members %v", got, want)
	}
	if st := e.pl.PreEnqueue(e.ctx, pods[0]); st.IsSuccess() || !strings.Contains(st.Message(), "2 of 3") {
		t.Errorf("PreEnqueue below the quorum: %v", st)
	}

	// A smaller member joins: the gang is planned again for what it has.
	small := gpuPod("g-d", 1, inGang("g"))
	if err := e.pl.podIndexer.Add(small); err != nil {
		t.Fatal(err)
	}
	e.pl.onPod(nil, small)
	if st, _ := e.schedule(pods[0]); !strings.Contains(st.Message(), "needs 5 nvidia.com/gpu for 3 members") {
		t.Errorf("after a 1-GPU member joined: %v, want no placement for 5 GPUs", st)
	}
	// And joins again while refused: the refusal goes.
	other := gpuPod("g-e", 1, inGang("g"))
	if err := e.pl.podIndexer.Add(other); err != nil {
		t.Fatal(err)
	}
	e.pl.onPod(nil, other)
	if v := gangVerdict(e, "g"); v != "" {
		t.Errorf("verdict %q kept after a member joined", v)
	}
}

// A fresh "no placement" verdict activates only the members not refused yet:
// a member already refused shows why its gang waits, and the capacity hints
// queue it again when room may come. Activating every member on every fresh
// verdict fed on itself while capacity churned (each activated member that
// found the verdict stale planned again and activated the others again).
func TestFreshVerdictActivatesOnlyMembersNotRefused(t *testing.T) {
	pods := members("g", 3, 2)
	e := newBarrierEnv(t, []*v1.Node{gpuNode("n1", 4)}, []*schedv1alpha1.PodGroup{podGroup("g", 3)}, pods)
	refuse := func(p *v1.Pod) {
		t.Helper()
		if st, _ := e.schedule(p); st.Code() != fwk.UnschedulableAndUnresolvable || !strings.Contains(st.Message(), "for 3 members") {
			t.Fatalf("%s: 3 × 2 GPUs on 4: %v, want no placement", p.Name, st)
		}
	}
	// The informer's adds completed the quorum and activated every member.
	waitActivated(t, e, []string{"g-a", "g-b", "g-c"})
	refuse(pods[0])
	if got, want := e.act.take(), []string{"g-b", "g-c"}; !slices.Equal(got, want) {
		t.Fatalf("first verdict activated %v, want the other members %v", got, want)
	}
	refuse(pods[1]) // the cached verdict
	if got := e.act.take(); len(got) != 0 {
		t.Fatalf("a cached verdict activated %v", got)
	}
	// Capacity changed somewhere: the verdict is stale and the next member
	// plans again, to the same answer.
	e.pl.capacityChanged()
	refuse(pods[0])
	if got, want := e.act.take(), []string{"g-c"}; !slices.Equal(got, want) {
		t.Errorf("fresh verdict activated %v, want only the member never refused %v", got, want)
	}
	refuse(pods[2])
	e.pl.capacityChanged()
	refuse(pods[1])
	if got := e.act.take(); len(got) != 0 {
		t.Errorf("fresh verdict with every member refused activated %v", got)
	}
}

// waitActivated waits until the plugin has activated exactly want (sorted)
// since the last take.
func waitActivated(t *testing.T, e *barrierEnv, want []string) {
	t.Helper()
	var got []string
	if err := wait.PollUntilContextTimeout(e.ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		got = append(got, e.act.take()...)
		slices.Sort(got)
		got = slices.Compact(got)
		return slices.Equal(got, want), nil
	}); err != nil {
		t.Fatalf("activated %v, want %v: %v", got, want, err)
	}
}

// A planned member that goes away (a Job scaled down while its gang was
// planned deletes the extra pods) voids the plan; the members it left out,
// which wait in the unschedulable pool, are woken to plan again around the
// members already reserved. Nothing else woke them: the reserved members
// then waited at Permit for a quorum no attempt would complete.
func TestPlannedMemberGoneWakesTheRest(t *testing.T) {
	pods := members("g", 3, 2)
	e := newBarrierEnv(t, []*v1.Node{gpuNode("n1", 4)}, []*schedv1alpha1.PodGroup{podGroup("g", 2)}, pods)
	// 3 × 2 GPUs on 4, quorum 2: two are planned, one is left out.
	var waiting, left []*v1.Pod
	for _, p := range pods {
		st, _ := e.schedule(p)
		switch {
		case st.IsWait():
			waiting = append(waiting, p)
		case st.IsSuccess():
		default:
			left = append(left, p)
		}
		if len(waiting) == 1 {
			break
		}
	}
	if len(waiting) != 1 {
		t.Fatalf("no member planned and waiting at Permit (left out: %d)", len(left))
	}
	planned := e.pl.gangs.Inspect(types.NamespacedName{Namespace: "ns", Name: "g"}).Plan
	var gone, out *v1.Pod
	for _, p := range pods {
		if p.UID == waiting[0].UID {
			continue
		}
		if _, ok := planned[p.UID]; ok {
			gone = p
		} else {
			out = p
		}
	}
	if gone == nil || out == nil {
		t.Fatalf("plan %v: want one more planned member and one left out", planned)
	}
	e.act.take()

	if err := e.pl.podIndexer.Delete(gone); err != nil {
		t.Fatal(err)
	}
	e.pl.onPodDelete(gone)
	if got := e.act.take(); !slices.Contains(got, out.Name) {
		t.Fatalf("activated %v after planned member %s left; want the member left out, %s", got, gone.Name, out.Name)
	}
	// Planning again places it beside the reserved member: the quorum of
	// 2 is complete and both are let through.
	if st, _ := e.schedule(out); !st.IsSuccess() {
		t.Fatalf("%s after the plan was voided: %v, want planned and the quorum complete", out.Name, st)
	}
}

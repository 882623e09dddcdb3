package cli

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/definition"
)

// A gang's BOUND and reason come from its pods as they are now and the
// current minMember: scaled up, down, or with members on their way out, it
// never shows more bound than members nor a reason from an earlier size.
func TestGangViewFollowsScaling(t *testing.T) {
	const stale = "gang ns/train: needs 12 nvidia.com/gpu for 3 members; best placement fits 2 of 3 members"
	bound := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{api.LabelPodGroup: "train"}},
			Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	}
	pending := func(name, msg string) *corev1.Pod {
		p := bound(name)
		p.Spec.NodeName, p.Status.Phase = "", corev1.PodPending
		if msg != "" {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: msg}}
		}
		return p
	}
	deleting := func(p *corev1.Pod) *corev1.Pod {
		p.DeletionTimestamp = &metav1.Time{Time: fixedNow}
		return p
	}
	failed := func(p *corev1.Pod) *corev1.Pod {
		p.Status.Phase = corev1.PodFailed
		return p
	}
	tests := []struct {
		name       string
		pods       []*corev1.Pod
		minMember  int32
		wantBound  int
		wantPods   int
		wantCell   string
		wantReason string
	}{
		{"scaled up past minMember", []*corev1.Pod{bound("a"), bound("b"), bound("c"), bound("d")}, 3, 4, 4, "4/4", ""},
		{"scaled down: a member being deleted does not count", []*corev1.Pod{bound("a"), bound("b"), deleting(bound("c"))}, 2, 2, 2, "2/2", ""},
		{"a failed member does not count", []*corev1.Pod{bound("a"), failed(bound("b")), pending("c", stale)}, 3, 1, 2, "1/3",
			"waiting for pods: 2 of 3 created"},
		{"below the quorum the count wins over a stale condition", []*corev1.Pod{pending("a", stale), pending("b", stale)}, 3, 0, 2, "0/3",
			"waiting for pods: 2 of 3 created"},
		{"at the quorum the scheduler's reason", []*corev1.Pod{pending("a", stale), pending("b", stale), pending("c", stale)}, 3, 0, 3, "0/3", stale},
		{"a deleted member's condition is not the gang's", []*corev1.Pod{bound("a"), pending("b", "fresh"), deleting(pending("c", stale)), deleting(pending("d", stale))}, 2, 1, 2, "1/2", "fresh"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := &gangAgg{gang: &definition.Gang{Definition: "train", MinMember: 99}, pods: tc.pods, pgNames: map[string]int{"train": len(tc.pods)}}
			in := describeInput{Live: true, PodGroups: map[string]*podGroupInfo{"train": {Name: "train", MinMember: tc.minMember, Phase: "Running"}}}
			gv := a.view(in)
			got := fmt.Sprintf("bound %d pods %d cell %s reason %q", gv.Bound, gv.Pods, boundCell(gv), gv.Reason)
			want := fmt.Sprintf("bound %d pods %d cell %s reason %q", tc.wantBound, tc.wantPods, tc.wantCell, tc.wantReason)
			if got != want {
				t.Errorf("got  %s\nwant %s", got, want)
			}
		})
	}
}

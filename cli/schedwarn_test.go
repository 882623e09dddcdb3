package cli

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestSchedulerWarnings: a pending pod no scheduler has looked at is named,
// once, with the fix; pods of muster-scheduler, bound pods and pods a
// scheduler answered are not.
func TestSchedulerWarnings(t *testing.T) {
	pod := func(name, sched, node string, conds ...corev1.PodCondition) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{SchedulerName: sched, NodeName: node},
			Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: conds}}
	}
	answered := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}
	tests := []struct {
		name string
		pods []*corev1.Pod
		want string // substring of the one warning; "" = none
	}{
		{"default scheduler, never looked at", []*corev1.Pod{pod("a", "default-scheduler", ""), pod("b", "default-scheduler", "")},
			`pod a waits for scheduler "default-scheduler", which has not looked at it`},
		{"muster's own pods", []*corev1.Pod{pod("a", defaultSchedulerName, "")}, ""},
		{"bound", []*corev1.Pod{pod("a", "default-scheduler", "n1")}, ""},
		{"the scheduler answered", []*corev1.Pod{pod("a", "default-scheduler", "", answered)}, ""},
	}
	for _, tc := range tests {
		got := schedulerWarnings(tc.pods, nil)
		switch {
		case tc.want == "" && len(got) != 0:
			t.Errorf("%s: warnings %q, want none", tc.name, got)
		case tc.want != "" && (len(got) != 1 || !strings.Contains(got[0], tc.want) || !strings.Contains(got[0], "muster set-scheduler")):
			t.Errorf("%s: warnings %q, want one containing %q and the fix", tc.name, got, tc.want)
		}
	}
}

package dashboard

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// TestBuildQueue: a workload an admission queue holds shows the queue's
// state; one that waits for quota with no gang yet (Kueue keeps it
// suspended, without pods) is a queued row of its own with the queue's
// words; a ganged workload not admitted is queued, not waiting for the
// scheduler; finished entries and admitted ones without a gang add nothing.
func TestBuildQueue(t *testing.T) {
	entry := func(name, state string) QueueEntry {
		return QueueEntry{APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet", Namespace: "team", Name: name, State: state,
			Admitted: state == "Admitted", Finished: state == "Finished", Summary: name + " is " + state, Created: now.Add(-time.Minute)}
	}
	in := Inputs{
		GPUResources: []corev1.ResourceName{"nvidia.com/gpu"},
		Now:          now,
		Nodes:        []*corev1.Node{node("n1", "a", 8)},
		PodGroups: []*schedv1alpha1.PodGroup{
			podGroup("train", "JobSet", "train", 1, now),
			podGroup("gated", "JobSet", "gated", 1, now),
		},
		Pods: []*corev1.Pod{
			pod("train-0", "train", "n1", 4, ready),
			pod("gated-0", "gated", "", 4, pending("")),
		},
		Queue: []QueueEntry{entry("train", "Admitted"), entry("late", "Pending"), entry("gated", "Pending"), entry("old", "Finished"), entry("nogang", "Admitted")},
	}
	s := Build(in)
	byName := map[string]WorkloadView{}
	for _, w := range s.Workloads {
		byName[w.Name] = w
	}
	for _, tc := range []struct{ name, state, queue, reason string }{
		{"train", "running", "Admitted", ""},
		{"late", "queued", "Pending", "late is Pending"},
		{"gated", "queued", "Pending", "gated is Pending"},
	} {
		w, ok := byName[tc.name]
		if !ok || w.State != tc.state || w.Queue != tc.queue || w.Reason != tc.reason {
			t.Errorf("%s: %+v (listed %t), want state %s, queue %s, reason %q", tc.name, w, ok, tc.state, tc.queue, tc.reason)
		}
	}
	if w := byName["late"]; w.Age != "60s" && w.Age != "1m" {
		t.Errorf("late: age %q, want the queue entry's", w.Age)
	}
	for _, name := range []string{"old", "nogang"} {
		if _, ok := byName[name]; ok {
			t.Errorf("%s listed; a finished entry or an admitted one without a gang adds no row", name)
		}
	}
}

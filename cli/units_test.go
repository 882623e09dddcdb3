package cli

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestSuggest(t *testing.T) {
	cands := []string{"jobset", "jobsets", "jobset.jobset.x-k8s.io", "raycluster", "rayjob", "pytorchjob"}
	for _, tc := range []struct{ in, want string }{
		{"jobsett", "jobset"},
		{"rayclustr", "raycluster"},
		{"pytorch", "pytorchjob"},
		{"zzz", ""},
	} {
		got := ""
		if s := suggest(tc.in, cands); len(s) > 0 {
			got = s[0]
		}
		if got != tc.want {
			t.Errorf("suggest(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestFormatMemory(t *testing.T) {
	for _, tc := range []struct {
		in   int64
		want string
	}{{0, "0"}, {4 << 30, "4Gi"}, {1 << 40, "1Ti"}, {2000 << 30, "2000Gi"}, {1536 << 20, "1.5Gi"}, {6000 << 30, "6000Gi"}, {512 << 20, "512Mi"}, {1000, "1000"}} {
		if got := formatMemory(tc.in); got != tc.want {
			t.Errorf("formatMemory(%d) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestPodReason(t *testing.T) {
	for _, tc := range []struct {
		name string
		pod  corev1.Pod
		want string
	}{
		{"waiting container", corev1.Pod{Spec: corev1.PodSpec{NodeName: "n"}, Status: corev1.PodStatus{Phase: corev1.PodPending,
			ContainerStatuses: []corev1.ContainerStatus{{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}}}}, "ImagePullBackOff"},
		{"unschedulable", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes are available"}}}}, "Unschedulable: 0/3 nodes are available"},
		{"event only", corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Status: corev1.PodStatus{Phase: corev1.PodPending}}, "FailedScheduling: from event"},
		{"gated", corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "q"}, Spec: corev1.PodSpec{SchedulingGates: []corev1.PodSchedulingGate{{Name: "g"}}}, Status: corev1.PodStatus{Phase: corev1.PodPending}}, "SchedulingGated"},
		{"crashed", corev1.Pod{Spec: corev1.PodSpec{NodeName: "n"}, Status: corev1.PodStatus{Phase: corev1.PodRunning,
			ContainerStatuses: []corev1.ContainerStatus{{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137}}}}}}, "OOMKilled"},
		{"succeeded", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}, "Completed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := podReason(&tc.pod, map[string]string{"Pod/p": "from event"}); got != tc.want {
				t.Errorf("podReason = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestTableAlignsPaintedCells(t *testing.T) {
	p := painter{on: true}
	tb := &table{}
	tb.add(plain("a"), painted("Running", p.status("Running")), plain("x"))
	tb.add(plain("longer"), plain("no"), plain("y"))
	var b strings.Builder
	if err := tb.write(&b); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	stripped := func(s string) string {
		for _, c := range []string{ansiGreen, ansiReset} {
			s = strings.ReplaceAll(s, c, "")
		}
		return s
	}
	if strings.Index(stripped(lines[0]), "x") != strings.Index(stripped(lines[1]), "y") {
		t.Errorf("columns misaligned:\n%q\n%q", stripped(lines[0]), stripped(lines[1]))
	}
}

// TestOwnerWalker: chains are followed once per owner, a UID mismatch
// (owner recreated under the same name) ends the chain, cycles end.
func TestOwnerWalker(t *testing.T) {
	ctrl := true
	ref := func(name, uid string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: name, UID: types.UID(uid), Controller: &ctrl}}
	}
	objs := map[types.UID]metav1.Object{
		"job":   &metav1.ObjectMeta{Name: "job", UID: "job", OwnerReferences: ref("top", "top")},
		"top":   &metav1.ObjectMeta{Name: "top", UID: "top"},
		"loopA": &metav1.ObjectMeta{Name: "a", UID: "loopA", OwnerReferences: ref("b", "loopB")},
		"loopB": &metav1.ObjectMeta{Name: "b", UID: "loopB", OwnerReferences: ref("a", "loopA")},
		"other": &metav1.ObjectMeta{Name: "stale", UID: "other"},
	}
	lookups := 0
	w := newOwnerWalker(func(_ context.Context, _ string, r metav1.OwnerReference) (metav1.Object, error) {
		lookups++
		if r.UID == "stale" {
			return objs["other"], nil
		}
		return objs[r.UID], nil
	})
	pod := func(owner, uid string) *metav1.ObjectMeta {
		return &metav1.ObjectMeta{Name: "p", OwnerReferences: ref(owner, uid)}
	}
	for i := 0; i < 3; i++ {
		if ok, err := w.reaches(context.Background(), pod("job", "job"), "top"); !ok || err != nil {
			t.Fatalf("pod → job → top: reaches=%v err=%v", ok, err)
		}
	}
	if lookups != 2 {
		t.Errorf("%d lookups for three pods of one Job; want 2 (job, top)", lookups)
	}
	// Both end the chain without an error: the walk reads them as "no".
	if ok, err := w.reaches(context.Background(), pod("stale", "stale"), "top"); ok || err != nil {
		t.Errorf("a stale reference: reaches=%v err=%v, want false and no error", ok, err)
	}
	if ok, err := w.reaches(context.Background(), pod("a", "loopA"), "top"); ok || err != nil {
		t.Errorf("a cycle: reaches=%v err=%v, want false and no error", ok, err)
	}
}

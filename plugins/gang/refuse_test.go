package gang

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/muster-io/muster/api"
)

func annotated(kv ...string) podOpt {
	return func(p *v1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Annotations[kv[i]] = kv[i+1]
		}
	}
}

func held(why string) podOpt {
	return annotated(api.AnnotationGrouping, api.GroupingWaiting, api.AnnotationGroupingReason, why)
}

// Pods nobody may schedule until someone acts — held by the pod-grouper,
// or of another gang mechanism — pass PreEnqueue and are refused in
// PreFilter, so that the reason reaches their PodScheduled condition; no
// preemption is tried for them and no gang state is kept.
func TestRefusedPodsSayWhy(t *testing.T) {
	tests := []struct {
		name string
		pod  *v1.Pod
		want []string
	}{
		{"held by the pod-grouper", gpuPod("held", 1, held(`Job/ns/j: workload annotation muster.io/min-member: "abc": must be a whole number`)),
			[]string{"muster cannot compute the pod's gang", `muster.io/min-member: "abc"`}},
		{"held without a reason", gpuPod("held-bare", 1, annotated(api.AnnotationGrouping, api.GroupingWaiting)),
			[]string{"muster cannot compute the pod's gang: no reason given"}},
		{"held with a huge reason", gpuPod("held-huge", 1, held(strings.Repeat("x", 100_000))),
			[]string{"muster cannot compute the pod's gang: xxx"}},
		{"Volcano", gpuPod("vc", 1, annotated(api.AnnotationVolcanoGroup, "vc-group"), func(p *v1.Pod) { p.Spec.SchedulerName = "muster-scheduler" }),
			[]string{"pod belongs to a Volcano PodGroup (annotation scheduling.k8s.io/group-name=vc-group): muster-scheduler does not schedule Volcano's gangs; " +
				"set schedulerName to Volcano's scheduler, or remove the annotation so muster groups the pod"}},
		{"KAI", gpuPod("kai", 1, annotated(api.AnnotationKAIGroup, "kai-group")),
			[]string{"KAI Scheduler PodGroup (annotation pod-group-name=kai-group)", "remove the annotation"}},
		{"Volcano with a gang-free marker", gpuPod("vc-free", 1, gangFree, annotated(api.AnnotationVolcanoGroup, "vc-group")),
			[]string{"Volcano PodGroup"}},
	}
	e := newBarrierEnv(t, []*v1.Node{gpuNode("n1", 4)}, nil, nil)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if st := e.pl.PreEnqueue(e.ctx, tc.pod); st != nil {
				t.Errorf("PreEnqueue %v, want nil: a refusal there reaches no condition", st)
			}
			state := framework.NewCycleState()
			res, st := e.pl.PreFilter(e.ctx, state, tc.pod, nil)
			if res != nil || st.Code() != fwk.UnschedulableAndUnresolvable {
				t.Fatalf("PreFilter %v %v, want UnschedulableAndUnresolvable", res, st)
			}
			for _, w := range tc.want {
				if !strings.Contains(st.Message(), w) {
					t.Errorf("reason %q lacks %q", st.Message(), w)
				}
			}
			if n := len(st.Message()); n > api.MaxReasonBytes+len("…") {
				t.Errorf("reason of %d bytes, want at most %d", n, api.MaxReasonBytes)
			}
			if _, st := e.pl.PostFilter(e.ctx, state, tc.pod, nil); st.Code() != fwk.UnschedulableAndUnresolvable {
				t.Errorf("PostFilter %v, want UnschedulableAndUnresolvable (no preemption for a refused pod)", st)
			}
		})
	}
	if n := e.pl.gangs.Len(); n != 0 {
		t.Errorf("plugin keeps state for %d gangs, want none", n)
	}
}

// A refused pod comes back when the pod-grouper decides (a label, the
// gang-free marker), when the other mechanism's annotation goes, or when
// its reason changes (so its condition says the current one).
func TestRefusedPodRetriedWhenTheCauseGoes(t *testing.T) {
	p := &Plugin{requirePodGrouper: true}
	heldPod := testPod("p", held("bad annotation"))
	vc := testPod("p", annotated(api.AnnotationVolcanoGroup, "vc"))
	tests := []struct {
		name     string
		old, new *v1.Pod
		want     fwk.QueueingHint
	}{
		{"held, then labelled", heldPod, testPod("p", inGang("g")), fwk.Queue},
		{"held, then marked gang-free", heldPod, testPod("p", gangFree), fwk.Queue},
		{"held, another cause", heldPod, testPod("p", held("broken definition")), fwk.Queue},
		{"held, same cause", heldPod, testPod("p", held("bad annotation"), annotated("other", "x")), fwk.QueueSkip},
		{"Volcano annotation removed", vc, testPod("p"), fwk.Queue},
		{"Volcano annotation changed", vc, testPod("p", annotated(api.AnnotationVolcanoGroup, "other")), fwk.Queue},
		{"Volcano pod, unrelated change", vc, testPod("p", annotated(api.AnnotationVolcanoGroup, "vc", "other", "x")), fwk.QueueSkip},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := p.isSchedulableAfterPodUpdated(klog.Background(), tc.new, tc.old, tc.new)
			if err != nil || got != tc.want {
				t.Errorf("hint %v (err %v), want %v", got, err, tc.want)
			}
		})
	}
}

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/muster-io/muster/localcluster"
)

// TestFitAgreesWithTheScheduler is fit's property: on the same cluster
// state, fit's verdict, nodes and reason are what muster-scheduler then
// does, for every kind of check the scheduler's profile makes (resources,
// taints, node affinity, inter-pod anti-affinity and affinity, hard
// topology spread, host ports). Preemption has its own tests of the same
// property (TestFitPreemptAgrees, TestFitPreemptWouldNotHelp).
//
// The pool: four 4-GPU nodes, two per zone; the last one also tainted
// maintenance=true:NoSchedule. Each case runs on the empty pool: its Job is
// deleted, and its pods gone, before the next.
func TestFitAgreesWithTheScheduler(t *testing.T) {
	ns, sched := fitSetup(t, "fit-prop-", 4, func(i int) localcluster.NodeSpec {
		s := localcluster.NodeSpec{GPUs: 4, Labels: map[string]string{zoneKey: []string{"zone-a", "zone-b"}[i/2]}}
		if i == 3 {
			s.Taints = []corev1.Taint{{Key: "maintenance", Value: "true", Effect: corev1.TaintEffectNoSchedule}}
		}
		return s
	})
	node := func(i int) string { return fmt.Sprintf("%s-%d", ns, i) }
	for i, tc := range []struct {
		name          string
		members, gpus int
		edit          func(job string, spec *corev1.PodSpec)
		// want is what both must say: members per node, or "" for no fit.
		want string
	}{
		{"resources", 3, 4, nil, fmt.Sprintf("%s=1,%s=1,%s=1", node(0), node(1), node(2))},
		{"taint refused", 4, 4, nil, ""},
		{"taint tolerated", 4, 4, tolerateMaintenance, fmt.Sprintf("%s=1,%s=1,%s=1,%s=1", node(0), node(1), node(2), node(3))},
		{"node affinity", 4, 1, func(_ string, s *corev1.PodSpec) { s.Affinity = fitZoneAffinity("zone-b") }, node(2) + "=4"},
		{"anti-affinity, one per node", 3, 1, antiAffinityOnHost, fmt.Sprintf("%s=1,%s=1,%s=1", node(0), node(1), node(2))},
		{"anti-affinity, one member too many", 4, 1, antiAffinityOnHost, ""},
		{"zone spread", 6, 1, zoneSpread, fmt.Sprintf("%s=3,%s=3", node(0), node(2))},
		{"zone spread beyond a zone", 10, 1, zoneSpread, ""},
		{"pod affinity within a zone", 5, 1, affinityInZone, fmt.Sprintf("%s=4,%s=1", node(0), node(1))},
		{"host ports, one per node", 3, 1, hostPort, fmt.Sprintf("%s=1,%s=1,%s=1", node(0), node(1), node(2))},
		{"host ports, one member too many", 4, 1, hostPort, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A name per case: the scheduler's events of an earlier case
			// must not answer for this one.
			job := fmt.Sprintf("prop-%d", i)
			data := editFitJob(t, fitJob(ns, job, sched, tc.members, tc.gpus, nil), func(tpl *corev1.PodTemplateSpec) {
				tpl.Labels = map[string]string{"app": job}
				if tc.edit != nil {
					tc.edit(job, &tpl.Spec)
				}
			})
			g := fitOnlyGang(t, runFit(t, "-f", fitFile(t, data)))
			if got := fitNodes(g).String(); g.Fits != (tc.want != "") || (g.Fits && got != tc.want) {
				t.Errorf("fit: %s on %s (%s); want %q", g.Verdict, got, g.Reason, tc.want)
			}
			submitAndCompare(t, ns, job, tc.members, data, g)
			if err := controlPlane.Client.BatchV1().Jobs(ns).Delete(context.Background(), job, metav1.DeleteOptions{PropagationPolicy: ptrTo(metav1.DeletePropagationBackground)}); err != nil {
				t.Fatal(err)
			}
			waitGone(t, ns, batchv1.JobNameLabel+"="+job)
		})
	}
}

// editFitJob changes the pod template of a fitJob manifest.
func editFitJob(t *testing.T, data []byte, edit func(*corev1.PodTemplateSpec)) []byte {
	t.Helper()
	var job batchv1.Job
	if err := json.Unmarshal(data, &job); err != nil {
		t.Fatal(err)
	}
	edit(&job.Spec.Template)
	out, err := json.Marshal(&job)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func tolerateMaintenance(_ string, s *corev1.PodSpec) {
	s.Tolerations = append(s.Tolerations, corev1.Toleration{Key: "maintenance", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
}

func fitZoneAffinity(zone string) *corev1.Affinity {
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
			Key: zoneKey, Operator: corev1.NodeSelectorOpIn, Values: []string{zone},
		}}}},
	}}}
}

// sameJob selects the Job's own pods by the label its template gives them.
// (fit -f sees the pods as the template writes them: a label the Job
// controller adds, such as its job-name, is only known on the live pods.)
func sameJob(job string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{"app": job}}
}

func antiAffinityOnHost(job string, s *corev1.PodSpec) {
	s.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
		TopologyKey: localcluster.HostnameLabel, LabelSelector: sameJob(job),
	}}}}
}

func affinityInZone(job string, s *corev1.PodSpec) {
	s.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
		TopologyKey: zoneKey, LabelSelector: sameJob(job),
	}}}}
}

func zoneSpread(job string, s *corev1.PodSpec) {
	s.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: zoneKey, WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: sameJob(job),
	}}
}

func hostPort(_ string, s *corev1.PodSpec) {
	s.Containers[0].Ports = []corev1.ContainerPort{{Name: "rdzv", ContainerPort: 29500, HostPort: 29500, Protocol: corev1.ProtocolTCP}}
}

// Package workloadwithjob tests native mode next to the Job controller's
// own gangs (gate WorkloadWithJob). Feature gates are process-global and a
// control plane with WorkloadWithJob cannot start beside one without it
// (localcluster refuses), so this is a test binary of its own, apart from
// test/e2e's shared control plane.
package workloadwithjob

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"

	"github.com/muster-io/muster/api"
	sandboxapp "github.com/muster-io/muster/cmd/muster-sandbox/app"
	"github.com/muster-io/muster/localcluster"
)

// TestRootJobsGroupedOnceByTheJobController: with WorkloadWithJob on, the
// Job controller creates a native PodGroup for every root Job and its pods
// in it. The pod-grouper in native mode, its webhook in front of every pod
// create, leaves those pods in that group and writes no PodGroup of its
// own: a root Job is grouped once, by the Job controller. Where the Job
// controller's group asks for less than muster's gang (a Job annotated
// muster.io/min-member without spec.scheduling gets a Basic group), the
// pod-grouper says so on the Job.
func TestRootJobsGroupedOnceByTheJobController(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane; not in -short")
	}
	ctx := context.Background() // the components stop with cp.Stop
	cp, err := localcluster.Start(localcluster.Options{WorkloadWithJob: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cp.Stop)
	// The CRDs muster ships (the pod-grouper watches Kartas and
	// scheduler-plugins PodGroups), before the controllers as the sandbox
	// installs them.
	for _, f := range []string{"run.ai_kartas.yaml", "scheduling.x-k8s.io_podgroups.yaml"} {
		if err := cp.InstallCRDFile(ctx, filepath.Join("..", "..", "..", "manifests", "crds", f)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cp.StartControllers(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.CreateNodes(ctx, 2, localcluster.GPUNodes("gpu", 4, localcluster.Topology{})); err != nil {
		t.Fatal(err)
	}
	if _, _, err := sandboxapp.StartNative(ctx, cp); err != nil {
		t.Fatal(err)
	}
	ns, err := cp.NewNamespace(ctx, "wwj-")
	if err != nil {
		t.Fatal(err)
	}
	if err := sandboxapp.OptInNative(ctx, cp, ns); err != nil {
		t.Fatal(err)
	}
	if err := sandboxapp.WaitNativeWebhook(ctx, cp, ns, time.Minute); err != nil {
		t.Fatal(err)
	}

	gang := &batchv1.JobSchedulingConfiguration{SchedulingPolicy: &schedulingv1alpha3.WorkloadPodGroupSchedulingPolicy{
		Gang: &schedulingv1alpha3.WorkloadPodGroupGangSchedulingPolicy{}, // minCount: parallelism
	}}
	tests := []struct {
		name       string
		scheduling *batchv1.JobSchedulingConfiguration
		// wantMinCount is the Job controller's gang; 0: a Basic group.
		wantMinCount int32
		// wantWarning: muster warns that its gang is not enforced.
		wantWarning bool
	}{
		{name: "gang", scheduling: gang, wantMinCount: 3},
		{name: "annotated", wantWarning: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job, err := cp.Client.BatchV1().Jobs(ns).Create(ctx, annotatedJob(tt.name, tt.scheduling), metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			pods, err := cp.WaitPodsBound(ctx, ns, batchv1.JobNameLabel+"="+job.Name, 3, localcluster.ShortTimeout)
			if err != nil {
				t.Fatal(err)
			}
			list, err := cp.Client.SchedulingV1beta1().PodGroups(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var mine []schedulingv1beta1.PodGroup
			for _, pg := range list.Items {
				if pg.Labels[api.LabelWorkloadUID] != "" {
					t.Errorf("the pod-grouper made native PodGroup %s (labels %v); the Job controller groups root Jobs", pg.Name, pg.Labels)
				}
				if metav1.IsControlledBy(&pg, job) {
					mine = append(mine, pg)
				}
			}
			if len(mine) != 1 {
				t.Fatalf("%d PodGroups controlled by Job %s, want the Job controller's one", len(mine), job.Name)
			}
			pg := mine[0]
			switch g := pg.Spec.SchedulingPolicy.Gang; {
			case tt.wantMinCount == 0 && g != nil:
				t.Errorf("PodGroup %s policy %+v, want Basic", pg.Name, pg.Spec.SchedulingPolicy)
			case tt.wantMinCount > 0 && (g == nil || g.MinCount != tt.wantMinCount):
				t.Errorf("PodGroup %s policy %+v, want a gang of %d", pg.Name, pg.Spec.SchedulingPolicy, tt.wantMinCount)
			}
			for _, p := range pods {
				if sg := p.Spec.SchedulingGroup; sg == nil || ptr.Deref(sg.PodGroupName, "") != pg.Name {
					t.Errorf("pod %s schedulingGroup %+v, want the Job controller's %s", p.Name, sg, pg.Name)
				}
				if v := p.Labels[api.LabelPodGroup]; v != "" {
					t.Errorf("pod %s labelled %s=%s by the pod-grouper", p.Name, api.LabelPodGroup, v)
				}
			}
			// Every member is yielded with a note naming the group.
			for _, p := range pods {
				waitEvent(t, cp, ns, string(p.UID), "GangManagedElsewhere", pg.Name)
			}
			if tt.wantWarning {
				waitEvent(t, cp, ns, string(job.UID), "GangNotEnforced", "gang of 3 is not enforced")
			} else {
				noEvent(t, cp, ns, string(job.UID), "GangNotEnforced")
			}
		})
	}
}

// annotatedJob is a root Job of 3 one-GPU pods that muster's annotation
// makes a gang of 3, with the Job controller's scheduling as given.
func annotatedJob(name string, scheduling *batchv1.JobSchedulingConfiguration) *batchv1.Job {
	job := localcluster.RootJob(name, 3, 1, scheduling)
	job.Annotations = map[string]string{api.AnnotationMinMember: "3"}
	return job
}

// events lists the events of ns about the object uid with reason.
func events(ctx context.Context, cp *localcluster.ControlPlane, ns, uid, reason string) ([]corev1.Event, error) {
	sel := fields.Set{"involvedObject.uid": uid, "reason": reason}.AsSelector().String()
	list, err := cp.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// waitEvent waits for an event about uid with reason whose message
// contains text.
func waitEvent(t *testing.T, cp *localcluster.ControlPlane, ns, uid, reason, text string) {
	t.Helper()
	err := localcluster.WaitFor(context.Background(), localcluster.ShortTimeout, fmt.Sprintf("a %s event naming %q", reason, text), func(ctx context.Context) (bool, string, error) {
		evs, err := events(ctx, cp, ns, uid, reason)
		if err != nil {
			return false, "", err
		}
		var msgs []string
		for _, e := range evs {
			if strings.Contains(e.Message, text) {
				return true, "", nil
			}
			msgs = append(msgs, e.Message)
		}
		return false, fmt.Sprintf("events %q", msgs), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// noEvent checks that no event about uid with reason appears for a while
// (the pods are bound and yielded by then, so a warning would have come).
func noEvent(t *testing.T, cp *localcluster.ControlPlane, ns, uid, reason string) {
	t.Helper()
	err := localcluster.Consistently(context.Background(), 3*time.Second, "no "+reason+" event", func(ctx context.Context) (bool, string, error) {
		evs, err := events(ctx, cp, ns, uid, reason)
		switch {
		case err != nil:
			return false, "", err
		case len(evs) > 0:
			return false, "event: " + evs[0].Message, nil
		}
		return true, "", nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

package localcluster_test

import (
	"context"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/utils/ptr"

	"github.com/muster-io/muster/localcluster"
)

// Feature gates are process-global: WorkloadWithJob is refused while a
// control plane that runs without it is up, and changes nothing then.
func TestWorkloadWithJobRefusedNextToAPlainControlPlane(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane; not in -short")
	}
	plain, err := localcluster.Start(localcluster.Options{NativePodGroups: true})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Stop()
	cp, err := localcluster.Start(localcluster.Options{WorkloadWithJob: true})
	if err == nil {
		cp.Stop()
		t.Fatal("Start with WorkloadWithJob succeeded while a control plane without it runs")
	}
	if !strings.Contains(err.Error(), "WorkloadWithJob") {
		t.Errorf("error %q does not name the option", err)
	}
	if utilfeature.DefaultFeatureGate.Enabled(features.WorkloadWithJob) {
		t.Error("the refused Start turned WorkloadWithJob on")
	}
}

// With WorkloadWithJob the Job controller creates a Workload and a PodGroup
// for each root Job (gang as spec.scheduling says, Basic without it) and
// creates the Job's pods in that group; the default scheduler binds them.
// Stop restores the gate.
func TestWorkloadWithJobGroupsRootJobs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane; not in -short")
	}
	if utilfeature.DefaultFeatureGate.Enabled(features.WorkloadWithJob) {
		t.Fatal("WorkloadWithJob is on before the control plane starts")
	}
	t.Cleanup(func() { // runs after cp.Stop, registered later
		if utilfeature.DefaultFeatureGate.Enabled(features.WorkloadWithJob) {
			t.Error("WorkloadWithJob still on after Stop")
		}
	})
	cp := startNativeCluster(t, localcluster.Options{WorkloadWithJob: true}, 3)
	if !utilfeature.DefaultFeatureGate.Enabled(features.GenericWorkload) || !utilfeature.DefaultFeatureGate.Enabled(features.WorkloadWithJob) {
		t.Fatal("GenericWorkload and WorkloadWithJob are not both on while the control plane runs")
	}
	ns, err := cp.NewNamespace(t.Context(), "workload-with-job-")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		scheduling *batchv1.JobSchedulingConfiguration
		gpus       int64
		// wantMinCount is the gang's minCount; 0 means a Basic PodGroup.
		wantMinCount int32
	}{
		{
			name: "gang",
			scheduling: &batchv1.JobSchedulingConfiguration{SchedulingPolicy: &schedulingv1alpha3.WorkloadPodGroupSchedulingPolicy{
				Gang: &schedulingv1alpha3.WorkloadPodGroupGangSchedulingPolicy{}, // minCount defaults to parallelism
			}},
			gpus:         1,
			wantMinCount: 3,
		},
		{name: "plain"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := localcluster.RootJob(tt.name, 3, tt.gpus, tt.scheduling)
			job, err := cp.Client.BatchV1().Jobs(ns).Create(t.Context(), job, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			pods, err := cp.WaitPodsBound(t.Context(), ns, batchv1.JobNameLabel+"="+job.Name, 3, localcluster.ShortTimeout)
			if err != nil {
				t.Fatal(err)
			}
			wl := controlledBy(t, cp, ns, job, listWorkloads)
			if ref := wl.Spec.ControllerRef; ref == nil || ref.Kind != "Job" || ref.Name != job.Name {
				t.Errorf("Workload %s controllerRef = %+v, want the Job", wl.Name, ref)
			}
			pg := controlledBy(t, cp, ns, job, listPodGroups)
			if ref := pg.Spec.WorkloadRef; ref == nil || ref.WorkloadName != wl.Name {
				t.Errorf("PodGroup %s workloadRef = %+v, want Workload %s", pg.Name, ref, wl.Name)
			}
			gang := pg.Spec.SchedulingPolicy.Gang
			switch {
			case tt.wantMinCount == 0 && (gang != nil || pg.Spec.SchedulingPolicy.Basic == nil):
				t.Errorf("PodGroup %s policy = %+v, want Basic", pg.Name, pg.Spec.SchedulingPolicy)
			case tt.wantMinCount > 0 && (gang == nil || gang.MinCount != tt.wantMinCount):
				t.Errorf("PodGroup %s policy = %+v, want gang minCount %d", pg.Name, pg.Spec.SchedulingPolicy, tt.wantMinCount)
			}
			for _, p := range pods {
				if sg := p.Spec.SchedulingGroup; sg == nil || ptr.Deref(sg.PodGroupName, "") != pg.Name {
					t.Errorf("pod %s schedulingGroup = %+v, want podGroupName %s", p.Name, sg, pg.Name)
				}
			}
		})
	}
}

func listWorkloads(ctx context.Context, cp *localcluster.ControlPlane, ns string) ([]*schedulingv1beta1.Workload, error) {
	list, err := cp.Client.SchedulingV1beta1().Workloads(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return itemPointers(list.Items), nil
}

func listPodGroups(ctx context.Context, cp *localcluster.ControlPlane, ns string) ([]*schedulingv1beta1.PodGroup, error) {
	list, err := cp.Client.SchedulingV1beta1().PodGroups(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return itemPointers(list.Items), nil
}

// itemPointers returns pointers to a list's items (the objects implement
// metav1.Object through pointer receivers).
func itemPointers[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}

// controlledBy returns the one object of ns, listed by list, whose
// controller is job; it fails the test unless there is exactly one.
func controlledBy[T metav1.Object](t *testing.T, cp *localcluster.ControlPlane, ns string, job *batchv1.Job,
	list func(context.Context, *localcluster.ControlPlane, string) ([]T, error)) T {
	t.Helper()
	objs, err := list(t.Context(), cp, ns)
	if err != nil {
		t.Fatal(err)
	}
	var mine []T
	var names []string
	for _, o := range objs {
		names = append(names, o.GetName())
		if metav1.IsControlledBy(o, job) {
			mine = append(mine, o)
		}
	}
	if len(mine) != 1 {
		var zero T
		t.Fatalf("%d objects controlled by Job %s among %v (%T), want 1", len(mine), job.Name, names, zero)
	}
	return mine[0]
}

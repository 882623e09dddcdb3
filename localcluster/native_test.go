package localcluster_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/muster-io/muster/localcluster"
)

// podGroupFinalizer is the finalizer the apiserver's PodGroupProtection
// admission stamps on native PodGroups.
const podGroupFinalizer = "scheduling.k8s.io/podgroup-protection"

// holdPeriod is how long a gang that cannot fit is watched for a bound
// member: long enough for the scheduler to retry the group several times.
const holdPeriod = 10 * time.Second

// startNativeCluster starts a control plane with opts, the controllers, the
// default kube-scheduler and n nodes of one GPU each, stopped at cleanup.
func startNativeCluster(t *testing.T, opts localcluster.Options, n int) *localcluster.ControlPlane {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a control plane; not in -short")
	}
	cp, err := localcluster.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cp.Stop)
	ctx := context.Background() // stopped by cp.Stop, which outlives t.Context
	if _, err := cp.StartControllers(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := localcluster.StartScheduler(ctx, cp, localcluster.SchedulerOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.CreateNodes(t.Context(), n, localcluster.GPUNodes("gpu", 1, localcluster.Topology{})); err != nil {
		t.Fatal(err)
	}
	return cp
}

// gangPod is a pod of one GPU in the native PodGroup group, labelled
// gang=<group>.
func gangPod(name, group string) *corev1.Pod {
	gpu := corev1.ResourceList{localcluster.DefaultGPUResource: resource.MustParse("1")}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"gang": group}},
		Spec: corev1.PodSpec{
			SchedulingGroup: &corev1.PodSchedulingGroup{PodGroupName: ptr.To(group)},
			Containers: []corev1.Container{{
				Name: "main", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: gpu, Limits: gpu},
			}},
		},
	}
}

// createGang creates a PodGroup with gang minCount and then its pods of one
// GPU each, and returns the PodGroup as created.
func createGang(t *testing.T, cp *localcluster.ControlPlane, ns, group string, minCount, pods int) *schedulingv1beta1.PodGroup {
	t.Helper()
	pg, err := cp.Client.SchedulingV1beta1().PodGroups(ns).Create(t.Context(), &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: group},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
			Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: int32(minCount)},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create PodGroup %s: %v", group, err)
	}
	for i := range pods {
		p, err := cp.Client.CoreV1().Pods(ns).Create(t.Context(), gangPod(fmt.Sprintf("%s-%d", group, i), group), metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create pod of %s: %v", group, err)
		}
		if sg := p.Spec.SchedulingGroup; sg == nil || ptr.Deref(sg.PodGroupName, "") != group {
			t.Fatalf("pod %s: spec.schedulingGroup = %+v after create, want podGroupName %q (is GenericWorkload on in the apiserver?)", p.Name, sg, group)
		}
	}
	return pg
}

// boundPods counts the pods of gang group that have a node.
func boundPods(ctx context.Context, cp *localcluster.ControlPlane, ns, group string) (int, string, error) {
	list, err := cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "gang=" + group})
	if err != nil {
		return 0, "", err
	}
	bound := 0
	for _, p := range list.Items {
		if p.Spec.NodeName != "" {
			bound++
		}
	}
	return bound, fmt.Sprintf("%d of %d pods of %s bound", bound, len(list.Items), group), nil
}

// waitScheduledCondition waits until the PodGroup's PodGroupInitiallyScheduled
// condition has status and reason.
func waitScheduledCondition(t *testing.T, cp *localcluster.ControlPlane, ns, name string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	desc := fmt.Sprintf("PodGroup %s/%s %s=%s (%s)", ns, name, schedulingv1beta1.PodGroupInitiallyScheduled, status, reason)
	err := localcluster.WaitFor(t.Context(), localcluster.ShortTimeout, desc, func(ctx context.Context) (bool, string, error) {
		pg, err := cp.Client.SchedulingV1beta1().PodGroups(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		c := meta.FindStatusCondition(pg.Status.Conditions, schedulingv1beta1.PodGroupInitiallyScheduled)
		if c == nil {
			return false, "no condition", nil
		}
		return c.Status == status && c.Reason == reason, fmt.Sprintf("%s (%s): %s", c.Status, c.Reason, c.Message), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The default kube-scheduler with GenericWorkload gang-schedules a
// hand-made native PodGroup: a gang that fits binds whole; one that fits
// only partly binds nothing for the whole hold period and binds whole once
// room frees; a deleted PodGroup stays while an active pod names it and is
// gone, its finalizer removed by the protection controller, once none does.
func TestNativeGangDefaultScheduler(t *testing.T) {
	cp := startNativeCluster(t, localcluster.Options{NativePodGroups: true}, 5)
	ns, err := cp.NewNamespace(t.Context(), "native-gang-")
	if err != nil {
		t.Fatal(err)
	}
	pgs := cp.Client.SchedulingV1beta1().PodGroups(ns)

	// Gang a: 3 of the 5 GPUs.
	a := createGang(t, cp, ns, "a", 3, 3)
	if !slices.Contains(a.Finalizers, podGroupFinalizer) {
		t.Fatalf("PodGroup a finalizers = %v, want %s from the PodGroupProtection admission plugin", a.Finalizers, podGroupFinalizer)
	}
	if _, err := cp.WaitPodsBound(t.Context(), ns, "gang=a", 3, localcluster.ShortTimeout); err != nil {
		t.Fatal(err)
	}
	waitScheduledCondition(t, cp, ns, "a", metav1.ConditionTrue, "Scheduled")

	// Gang b needs 3 GPUs; 2 are free. Not one member may bind.
	createGang(t, cp, ns, "b", 3, 3)
	err = localcluster.Consistently(t.Context(), holdPeriod, "no member of gang b bound", func(ctx context.Context) (bool, string, error) {
		n, seen, err := boundPods(ctx, cp, ns, "b")
		return n == 0, seen, err
	})
	if err != nil {
		t.Fatal(err)
	}
	waitScheduledCondition(t, cp, ns, "b", metav1.ConditionFalse, schedulingv1beta1.PodGroupReasonUnschedulable)

	// Room for b: gang a's pods go, then b binds whole.
	if err := cp.ForceDeletePods(t.Context(), ns, "gang=a"); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.WaitPodsBound(t.Context(), ns, "gang=b", 3, localcluster.ShortTimeout); err != nil {
		t.Fatal(err)
	}

	t.Run("a PodGroup whose pods are gone finishes deleting", func(t *testing.T) {
		if err := cp.WaitPodsGone(t.Context(), ns, "gang=a", localcluster.ShortTimeout); err != nil {
			t.Fatal(err)
		}
		if err := pgs.Delete(t.Context(), "a", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitPodGroupGone(t, cp, ns, "a")
	})

	t.Run("a PodGroup with active pods stays until they finish", func(t *testing.T) {
		if err := pgs.Delete(t.Context(), "b", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		err := localcluster.Consistently(t.Context(), 3*time.Second, "PodGroup b terminating with its finalizer", func(ctx context.Context) (bool, string, error) {
			pg, err := pgs.Get(ctx, "b", metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			seen := fmt.Sprintf("deletionTimestamp=%v finalizers=%v", pg.DeletionTimestamp, pg.Finalizers)
			return pg.DeletionTimestamp != nil && slices.Contains(pg.Finalizers, podGroupFinalizer), seen, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// As a kubelet would: the pods run to completion.
		for i := range 3 {
			name := fmt.Sprintf("b-%d", i)
			p, err := cp.Client.CoreV1().Pods(ns).Get(t.Context(), name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			p.Status.Phase = corev1.PodSucceeded
			if _, err := cp.Client.CoreV1().Pods(ns).UpdateStatus(t.Context(), p, metav1.UpdateOptions{}); err != nil {
				t.Fatalf("pod %s Succeeded: %v", name, err)
			}
		}
		waitPodGroupGone(t, cp, ns, "b")
	})
}

// waitPodGroupGone waits until the PodGroup is not found.
func waitPodGroupGone(t *testing.T, cp *localcluster.ControlPlane, ns, name string) {
	t.Helper()
	err := localcluster.WaitFor(t.Context(), localcluster.ShortTimeout, "PodGroup "+ns+"/"+name+" gone", func(ctx context.Context) (bool, string, error) {
		pg, err := cp.Client.SchedulingV1beta1().PodGroups(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		if err != nil {
			return false, "", err
		}
		return false, fmt.Sprintf("deletionTimestamp=%v finalizers=%v", pg.DeletionTimestamp, pg.Finalizers), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

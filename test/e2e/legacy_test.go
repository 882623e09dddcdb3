package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/cli"
	"github.com/muster-io/muster/localcluster"
	"github.com/muster-io/muster/podgrouper"
)

// The deprecated definition format (ResourceInterface, the Karta format's
// earlier name) served by its own CRD: the pod-grouper and the CLI read its
// objects as Kartas. The CRD is installed at setup so every pod-grouper
// started later watches it; no other test creates its objects.

func init() {
	registerSetup("ResourceInterface CRD", func(ctx context.Context, cp *localcluster.ControlPlane) error {
		return cp.InstallCRD(ctx, localcluster.PermissiveCRD("optimization.nvidia.com", "v1alpha1", "ResourceInterface", "resourceinterfaces", apiextensionsv1.ClusterScoped))
	})
}

// legacyCronJobRI overrides the catalog's CronJob definition (no gang: each
// run's pods complete independently) with one that gangs a run's pods.
const legacyCronJobRI = `
apiVersion: optimization.nvidia.com/v1alpha1
kind: ResourceInterface
metadata:
  name: legacy-e2e-cronjob
spec:
  structureDefinition:
    rootComponent:
      name: cronjob
      kind: {group: batch, version: v1, kind: CronJob}
    childComponents:
    - name: job
      ownerRef: cronjob
      kind: {group: batch, version: v1, kind: Job}
      specDefinition:
        podTemplateSpecPath: .spec.jobTemplate.spec.template
      scaleDefinition:
        replicasPath: .spec.jobTemplate.spec.parallelism // 1
      podSelector:
        componentTypeSelector:
          keyPath: .metadata.labels["batch.kubernetes.io/job-name"]
  optimizationInstructions:
    gangScheduling:
      podGroups:
      - name: run
        members:
        - componentName: job
`

// TestLegacyResourceInterface: a ResourceInterface object overriding the
// catalog's CronJob definition gangs a CronJob's run (the catalog leaves
// its pods alone), its Valid condition carries the deprecation notice, and
// "muster definitions" lists it as a cluster definition with a warning.
func TestLegacyResourceInterface(t *testing.T) {
	ctx := context.Background()
	ns, sched := pgrTest(t, "legacy-ri")

	objs, err := controlPlane.Apply(ctx, []byte(legacyCronJobRI), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 {
		t.Fatalf("applied %d objects, want 1", len(objs))
	}
	t.Cleanup(func() {
		err := controlPlane.Dynamic.Resource(podgrouper.LegacyResource).Delete(context.Background(), "legacy-e2e-cronjob", metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting the ResourceInterface: %v", err)
		}
	})
	waitFor(t, time.Minute, "ResourceInterface legacy-e2e-cronjob Valid=True with the deprecation notice",
		objectIs(dynamicGetter(controlPlane.Dynamic.Resource(podgrouper.LegacyResource)), "legacy-e2e-cronjob", validWith("True", "deprecated")))

	// A suspended CronJob never fires; its run is a Job created here as
	// the CronJob controller would, owned by it.
	spec := pgrGPUPodSpec(sched, 1)
	cj, err := controlPlane.Client.BatchV1().CronJobs(ns).Create(ctx, &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly"},
		Spec: batchv1.CronJobSpec{Schedule: "0 0 1 1 *", Suspend: ptr.To(true), JobTemplate: batchv1.JobTemplateSpec{
			Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](2), Completions: ptr.To[int32](2),
				Template: corev1.PodTemplateSpec{Spec: spec}},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = controlPlane.Client.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly-1", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "batch/v1", Kind: "CronJob", Name: cj.Name, UID: cj.UID, Controller: ptr.To(true)}}},
		Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](2), Completions: ptr.To[int32](2),
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"run": "nightly-1"}}, Spec: spec}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods := pgrWaitPods(t, ns, "run=nightly-1", 2, "in one PodGroup", func(p *corev1.Pod) bool {
		return p.Labels[api.LabelPodGroup] != "" && !api.ScheduledAlone(p.Annotations)
	})
	name := pods[0].Labels[api.LabelPodGroup]
	pgrWaitPodGroup(t, ns, name, "minMember 2 from the ResourceInterface", func(pg *schedv1alpha1.PodGroup) bool {
		return pg.Spec.MinMember == 2 && pg.Labels[api.LabelDefinition] == "legacy-e2e-cronjob"
	})

	out, errOut, code := muster(t, "definitions", "-o", "json")
	if code != 0 {
		t.Fatalf("muster definitions: exit %d: %s", code, errOut)
	}
	if !strings.Contains(errOut, `definition "legacy-e2e-cronjob" is a optimization.nvidia.com/v1alpha1 ResourceInterface`) {
		t.Errorf("muster definitions stderr %q: want the deprecation warning", errOut)
	}
	var list cli.DefinitionList
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, row := range list.Items {
		if row.Name == "legacy-e2e-cronjob" {
			found = true
			if row.Origin != "cluster" || !row.Active || !strings.Contains(row.RootKind, "CronJob") {
				t.Errorf("row %+v: want an active cluster definition of CronJob", row)
			}
		}
		if row.Name == "cronjob" && row.Active {
			t.Errorf("the embedded cronjob definition is still active: %+v", row)
		}
	}
	if !found {
		t.Errorf("muster definitions does not list legacy-e2e-cronjob: %s", out)
	}
}

// validWith checks a definition object's Valid condition.
func validWith(status, msgPart string) func(*unstructured.Unstructured) (bool, string) {
	return func(u *unstructured.Unstructured) (bool, string) {
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == podgrouper.ConditionValid {
				msg, _ := m["message"].(string)
				return m["status"] == status && strings.Contains(msg, msgPart), fmt.Sprintf("%v", m)
			}
		}
		return false, "no Valid condition"
	}
}

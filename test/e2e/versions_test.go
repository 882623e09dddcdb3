package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/cli"
	"github.com/muster-io/muster/localcluster"
	"github.com/muster-io/muster/podgrouper"
)

// A kind served at three versions, with a definition for one: v1 has
// .spec.workers, v2 renamed it .spec.replicas, v3 has .spec.workers again.

func init() {
	registerSetup("Gizmo CRD of three versions", func(ctx context.Context, cp *localcluster.ControlPlane) error {
		return cp.InstallCRD(ctx, gizmoCRD())
	})
}

func gizmoCRD() *apiextensionsv1.CustomResourceDefinition {
	obj := func(fields ...string) *apiextensionsv1.CustomResourceValidation {
		spec := apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"template": {Type: "object", XPreserveUnknownFields: ptr.To(true)},
		}}
		for _, f := range fields {
			spec.Properties[f] = apiextensionsv1.JSONSchemaProps{Type: "integer"}
		}
		return &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
			Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"spec":   spec,
				"status": {Type: "object", XPreserveUnknownFields: ptr.To(true)},
			},
		}}
	}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "gizmos.versions.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "versions.example.com",
			Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "gizmos", Singular: "gizmo", Kind: "Gizmo", ListKind: "GizmoList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: true, Storage: true, Schema: obj("workers")},
				{Name: "v2", Served: true, Schema: obj("replicas")},
				{Name: "v3", Served: true, Schema: obj("workers")},
			},
		},
	}
}

const gizmoKarta = `
apiVersion: run.ai/v1alpha1
kind: Karta
metadata:
  name: versions-e2e-gizmo
spec:
  structureDefinition:
    rootComponent:
      name: gizmo
      kind: {group: versions.example.com, version: v1, kind: Gizmo}
    childComponents:
    - name: worker
      ownerRef: gizmo
      specDefinition: {podTemplateSpecPath: .spec.template}
      scaleDefinition: {replicasPath: .spec.workers}
`

// TestCLIVersionFallback: the CLI reads a Gizmo at v1 with the v1
// definition and at v3 with it too (v3's served schema has every field it
// reads), and refuses v2, whose schema renamed .spec.workers, with a
// message naming the field, as a structured error with -o json.
func TestCLIVersionFallback(t *testing.T) {
	ctx := context.Background()
	ns := testNamespace(t, "versions-")
	if _, err := controlPlane.Apply(ctx, []byte(gizmoKarta), ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		err := controlPlane.Dynamic.Resource(podgrouper.KartaResource).Delete(context.Background(), "versions-e2e-gizmo", metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting the Karta: %v", err)
		}
	})
	gvr := schema.GroupVersionResource{Group: "versions.example.com", Version: "v1", Resource: "gizmos"}
	_, err := controlPlane.Dynamic.Resource(gvr).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "versions.example.com/v1", "kind": "Gizmo",
		"metadata": map[string]any{"name": "g1"},
		"spec": map[string]any{"workers": int64(3), "template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "c", "image": "busybox"}}}}},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"v1", "v3"} {
		d := describeJSON(t, ns, "gizmos."+v+".versions.example.com/g1")
		if d.Definition != "versions-e2e-gizmo" || d.APIVersion != "versions.example.com/"+v || d.Totals.Pods != 3 {
			t.Errorf("describe at %s: definition %s, apiVersion %s, %d pods; want versions-e2e-gizmo and 3 pods", v, d.Definition, d.APIVersion, d.Totals.Pods)
		}
	}
	out, errOut, code := muster(t, "describe", "gizmos.v2.versions.example.com/g1", "-n", ns, "-o", "json")
	var rep cli.NoDefinitionReport
	if jerr := json.Unmarshal([]byte(out), &rep); jerr != nil || code != cli.ExitNoDefinition || rep.Kind != "Gizmo" ||
		!strings.Contains(errOut, "no definition for Gizmo at version v2") || !strings.Contains(errOut, ".spec.workers") ||
		!strings.Contains(rep.Message, "add a definition for v2") {
		t.Errorf("describe at v2: exit %d, stdout %q (%v), stderr %q; want exit 4 naming .spec.workers", code, out, jerr, errOut)
	}
	// get lists the kind at the version of its definition.
	out, errOut, code = muster(t, "get", "--all-types", "-n", ns, "-o", "json")
	var l cli.WorkloadList
	if err := json.Unmarshal([]byte(out), &l); err != nil || code != 0 || len(l.Items) != 1 || l.Items[0].APIVersion != "versions.example.com/v1" || l.Items[0].Pods != 3 {
		t.Errorf("get --all-types: exit %d, %s, stderr %q", code, out, errOut)
	}
}

const gizmoGangKarta = `
apiVersion: run.ai/v1alpha1
kind: Karta
metadata:
  name: versions-e2e-gizmo-gang
spec:
  structureDefinition:
    rootComponent:
      name: gizmo
      kind: {group: versions.example.com, version: v1, kind: Gizmo}
    childComponents:
    - name: worker
      ownerRef: gizmo
      kind: {group: "", version: v1, kind: Pod}
      specDefinition: {podTemplateSpecPath: .spec.template}
      scaleDefinition: {replicasPath: .spec.workers}
  optimizationInstructions:
    gangScheduling:
      podGroups:
      - name: gizmo
        members:
        - componentName: worker
`

// TestPodGrouperVersionFallback: the pod-grouper gangs the pods of a Gizmo
// referenced at v3 (its schema has every field the v1 definition reads)
// and holds those referenced at v2 (.spec.workers renamed) with the
// registry's message, instead of grouping them by a definition that
// misreads their workload.
func TestPodGrouperVersionFallback(t *testing.T) {
	ctx := context.Background()
	ns, sched := pgrTest(t, "versions-pgr")
	pgrApplyKarta(t, gizmoGangKarta)
	pgrWaitKartaValid(t, "versions-e2e-gizmo-gang", "True", "")
	spec := pgrGPUPodSpec(sched, 1)
	gvr := schema.GroupVersionResource{Group: "versions.example.com", Version: "v1", Resource: "gizmos"}
	mk := func(name string) *unstructured.Unstructured {
		g, err := controlPlane.Dynamic.Resource(gvr).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "versions.example.com/v1", "kind": "Gizmo",
			"metadata": map[string]any{"name": name},
			"spec":     map[string]any{"workers": int64(2), "template": map[string]any{"spec": pgrToMap(t, spec)}},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	pod := func(g *unstructured.Unstructured, version, name string) {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"gizmo": g.GetName()},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "versions.example.com/" + version, Kind: "Gizmo",
					Name: g.GetName(), UID: g.GetUID(), Controller: ptr.To(true)}}},
			Spec: spec,
		}
		if _, err := controlPlane.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	fits, moved := mk("fits"), mk("moved")
	pod(fits, "v3", "fits-0")
	pod(fits, "v3", "fits-1")
	pod(moved, "v2", "moved-0")

	pgrWaitPodGroup(t, ns, "fits", "minMember 2", func(pg *schedv1alpha1.PodGroup) bool { return pg.Spec.MinMember == 2 })
	pgrWaitPods(t, ns, "gizmo=fits", 2, "in PodGroup fits", pgrInGroup("fits"))
	pgrWaitPods(t, ns, "gizmo=moved", 1, "waiting, with the version rule's message", func(p *corev1.Pod) bool {
		r := p.Annotations[api.AnnotationGroupingReason]
		return p.Annotations[api.AnnotationGrouping] == api.GroupingWaiting && p.Labels[api.LabelPodGroup] == "" &&
			strings.Contains(r, "no definition for Gizmo at version v2") && strings.Contains(r, ".spec.workers")
	})
}

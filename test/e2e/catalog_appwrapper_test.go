package e2e

import (
	"context"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/localcluster"
)

// The catalog has no AppWrapper definition on purpose (catalog/wrappers): the
// pod-grouper passes over an owner without a definition to the top-most
// one that has one, so a workload wrapped in an AppWrapper keeps its own
// kind's gang, with the rules that kind needs. These tests hold that with
// the real pod-grouper.

const awLabel = "workload.codeflare.dev/appwrapper"

func init() {
	registerSetup("AppWrapper CRD", func(ctx context.Context, cp *localcluster.ControlPlane) error {
		return cp.InstallCRD(ctx, localcluster.PermissiveCRD("workload.codeflare.dev", "v1beta2", "AppWrapper", "appwrappers", apiextensionsv1.NamespaceScoped))
	})
}

// awWrap returns an AppWrapper around the fixture root (its template, with
// the pod sets the AppWrapper webhook infers for PyTorchJob), and copies
// of the root and pods as the AppWrapper controller makes them: the root
// owned by the AppWrapper, the pods labelled with its name.
func awWrap(t *testing.T, f *catFixture, podSets []any) (*unstructured.Unstructured, *unstructured.Unstructured, []*unstructured.Unstructured) {
	t.Helper()
	name := f.root.GetName() + "-aw"
	tmpl := f.root.DeepCopy()
	for _, k := range []string{"uid", "namespace"} {
		unstructured.RemoveNestedField(tmpl.Object, "metadata", k)
	}
	aw := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "workload.codeflare.dev/v1beta2",
		"kind":       "AppWrapper",
		"metadata":   map[string]any{"name": name, "uid": "aw000000-0000-4000-8000-000000000001"},
		"spec": map[string]any{"components": []any{map[string]any{
			"template": tmpl.Object,
			"podSets":  podSets,
		}}},
	}}
	root := f.root.DeepCopy()
	root.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "workload.codeflare.dev/v1beta2", Kind: "AppWrapper",
		Name: name, UID: aw.GetUID(), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}})
	root.SetLabels(map[string]string{awLabel: name})
	var pods []*unstructured.Unstructured
	for _, p := range f.pods {
		c := p.DeepCopy()
		l := c.GetLabels()
		l[awLabel] = name
		c.SetLabels(l)
		pods = append(pods, c)
	}
	return aw, root, pods
}

// TestCatalogAppWrapperKeepsWrappedGang replays the PyTorchJob fixture
// inside an AppWrapper: the pods get the PyTorchJob's gang (its expected
// min-member and resources, the PodGroup owned by and named for the
// PyTorchJob), not one of the AppWrapper, which KAI's pod-grouper would
// make with min-member 1.
func TestCatalogAppWrapperKeepsWrappedGang(t *testing.T) {
	sched := "cat-appwrapper"
	startPodGrouper(t, sched)
	f := catLoadFixture(t, "pytorchjob")
	podSets := []any{
		map[string]any{"replicas": int64(1), "path": "template.spec.pytorchReplicaSpecs.Master.template"},
		map[string]any{"replicas": int64(3), "path": "template.spec.pytorchReplicaSpecs.Worker.template"},
	}
	aw, root, pods := awWrap(t, f, podSets)
	ns := testNamespace(t, "cat-aw-")
	pgrReplayFixture(t, ns, sched, aw, []*unstructured.Unstructured{root}, pods)
	pgrCheckFixture(t, ns, "pytorchjob", root.GetName(), f.want)

	l, err := podGroups(t).SchedulingV1alpha1().PodGroups(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 1 {
		t.Fatalf("PodGroups %v, want the PyTorchJob's one", podGroupNames(t, ns))
	}
	pg := l.Items[0]
	if k, n := pg.Labels[api.LabelWorkloadKind], pg.Labels[api.LabelWorkloadName]; k != "PyTorchJob" || n != root.GetName() {
		t.Errorf("PodGroup %s is for %s %s, want PyTorchJob %s", pg.Name, k, n, root.GetName())
	}
	if refs := pg.OwnerReferences; len(refs) != 1 || refs[0].Kind != "PyTorchJob" {
		t.Errorf("PodGroup %s owners %v, want the PyTorchJob", pg.Name, refs)
	}
}

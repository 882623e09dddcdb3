package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	kartav1alpha1 "github.com/muster-io/muster/api/v1alpha1"
	"github.com/muster-io/muster/catalog"
	"github.com/muster-io/muster/localcluster"
)

// Replaying a catalog fixture next to the real built-in controllers.
//
// The ReplicaSet and StatefulSet controllers create pods as soon as their
// object exists, with names of their own (ReplicaSet) or at the same names
// the fixture uses (StatefulSet), and they delete pods beyond spec.replicas.
// An exact replay (the fixture's pods, names, labels and owner references)
// therefore works like this:
//
//  1. A ValidatingAdmissionPolicy bound to the test namespace admits pod
//     creations from the replay's own (impersonated) user only. The
//     controllers' attempts are refused for as long as the replay runs; they
//     retry.
//  2. Objects are created in owner order with the owner UIDs rewritten to the
//     real ones. Controller objects get spec.replicas equal to the number of
//     fixture pods they own (checked against the fixture when it gives
//     replicas), and what children.yaml abbreviates is completed the way the
//     operator would have written it: selector and template from the pods,
//     StatefulSet ordinals.start from the pods' ordinals (LWS worker sets
//     start at 1). Deployments are created paused, so the Deployment
//     controller does not create a ReplicaSet of its own before the
//     fixture's exists; their ReplicaSet's template is the Deployment's plus
//     pod-template-hash, so once unpaused the controller takes it as its
//     current ReplicaSet. StatefulSets use updateStrategy OnDelete: the
//     fixtures' controller-revision-hash values are invented, and a rolling
//     update would replace the pods. Jobs get spec.managedBy, which the Job
//     controller leaves alone.
//  3. The fixture pods are created by the replay user with owner references
//     to the real controllers, which adopt and count them.
//  4. The replay waits until every ReplicaSet and StatefulSet reports
//     status.replicas = spec.replicas for its current generation (the
//     controller has counted every fixture pod), unpauses the Deployments,
//     waits for them to observe that, removes the policy and checks that
//     the namespace holds exactly the fixture's pods and that no Deployment
//     made a ReplicaSet of its own.

func init() {
	registerSetup("catalog fixture CRD versions", func(ctx context.Context, cp *localcluster.ControlPlane) error {
		crds, err := catMultiVersionCRDs(pgrRepoRoot())
		if err != nil {
			return err
		}
		for _, crd := range crds {
			if err := cp.InstallCRD(ctx, crd); err != nil {
				return err
			}
		}
		return nil
	})
}

// catMultiVersionCRDs returns a permissive CRD serving every version the
// fixtures use for a custom kind, where they use more than one: an operator
// may write owner references in another served version than the one the
// user wrote the object in (KServe points at an LLMInferenceService as
// v1alpha2 when it was created as v1alpha1), and the owner walk must find
// it. The version the objects are written in is stored. This runs before
// the pod-grouper's setup, which leaves existing CRDs alone. Kinds of the
// real operators' CRDs are left to those.
func catMultiVersionCRDs(root string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	files, err := filepath.Glob(filepath.Join(root, "catalog", "testdata", "*", "*.yaml"))
	if err != nil {
		return nil, err
	}
	storage := map[schema.GroupKind]string{}
	versions := map[schema.GroupKind]map[string]bool{}
	custom := func(gk schema.GroupKind) bool {
		return !pgrBuiltinGroup(gk.Group) && !catOperatorGroups[gk.Group]
	}
	note := func(gvk schema.GroupVersionKind, stored bool) {
		gk := gvk.GroupKind()
		if !custom(gk) {
			return
		}
		if versions[gk] == nil {
			versions[gk] = map[string]bool{}
		}
		versions[gk][gvk.Version] = true
		if _, ok := storage[gk]; stored && !ok {
			storage[gk] = gvk.Version
		}
	}
	for _, f := range files {
		base := filepath.Base(f)
		if base != "object.yaml" && base != "children.yaml" && base != "pods.yaml" {
			continue
		}
		docs, err := pgrReadDocs(f)
		if err != nil {
			return nil, err
		}
		for _, d := range docs {
			note(d.GroupVersionKind(), true)
			for _, r := range d.GetOwnerReferences() {
				gv, err := schema.ParseGroupVersion(r.APIVersion)
				if err != nil {
					return nil, fmt.Errorf("%s: %s %s: owner apiVersion %q: %w", f, d.GetKind(), d.GetName(), r.APIVersion, err)
				}
				note(gv.WithKind(r.Kind), false)
			}
		}
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for gk, vs := range versions {
		stored, ok := storage[gk]
		if len(vs) < 2 || !ok {
			continue
		}
		crd := pgrApproved(localcluster.PermissiveCRD(gk.Group, stored, gk.Kind, strings.ToLower(gk.Kind)+"s", apiextensionsv1.NamespaceScoped))
		var names []string
		for v := range vs {
			if v != stored {
				names = append(names, v)
			}
		}
		sort.Strings(names)
		for _, v := range names {
			extra := *crd.Spec.Versions[0].DeepCopy()
			extra.Name, extra.Storage = v, false
			crd.Spec.Versions = append(crd.Spec.Versions, extra)
		}
		out = append(out, crd)
	}
	return out, nil
}

// catReplayUser is the user the replay creates pods as.
const catReplayUser = "muster-e2e-fixture-replay"

// catFixture is one catalog/testdata/<name> folder.
type catFixture struct {
	name     string
	root     *unstructured.Unstructured
	children []*unstructured.Unstructured
	pods     []*unstructured.Unstructured
	want     pgrFixtureExpected
}

func catLoadFixture(t testing.TB, name string) *catFixture {
	t.Helper()
	dir := filepath.Join(pgrRepoRoot(), "catalog", "testdata", name)
	object, err := pgrReadDocs(filepath.Join(dir, "object.yaml"))
	if err != nil || len(object) != 1 {
		t.Fatalf("%s/object.yaml: %d objects, err %v", name, len(object), err)
	}
	children, err := pgrReadDocs(filepath.Join(dir, "children.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	pods, err := pgrReadDocs(filepath.Join(dir, "pods.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "expected.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	f := &catFixture{name: name, root: object[0], children: children, pods: pods}
	if err := yaml.Unmarshal(data, &f.want); err != nil {
		t.Fatalf("%s/expected.yaml: %v", name, err)
	}
	return f
}

// catReplayed is what a replay created.
type catReplayed struct {
	ns   string
	root *unstructured.Unstructured
	// byKey: "Kind/name" → created object.
	byKey map[string]*unstructured.Unstructured
}

func catKey(o *unstructured.Unstructured) string { return o.GetKind() + "/" + o.GetName() }

// catControllerRef returns the fixture's controller owner reference of o.
func catControllerRef(o *unstructured.Unstructured) *metav1.OwnerReference {
	for _, r := range o.GetOwnerReferences() {
		if r.Controller != nil && *r.Controller {
			return &r
		}
	}
	return nil
}

// catPerPodLabels vary from pod to pod of one controller and never belong in
// a selector or template.
var catPerPodLabels = map[string]bool{
	"statefulset.kubernetes.io/pod-name": true,
	"apps.kubernetes.io/pod-index":       true,
	"controller-revision-hash":           true,
}

// catCommonLabels returns the labels every pod has with the same value.
func catCommonLabels(pods []*unstructured.Unstructured) map[string]any {
	out := map[string]any{}
	for i, p := range pods {
		l := p.GetLabels()
		if i == 0 {
			for k, v := range l {
				if !catPerPodLabels[k] {
					out[k] = v
				}
			}
			continue
		}
		for k, v := range out {
			if l[k] != v {
				delete(out, k)
			}
		}
	}
	return out
}

// catTemplateFromPod builds a pod template from a fixture pod: its spec
// without what the controller sets per pod, and the given labels.
func catTemplateFromPod(pod *unstructured.Unstructured, labels map[string]any, sched string) map[string]any {
	spec, _, _ := unstructured.NestedMap(pod.Object, "spec")
	spec = runtimeDeepCopy(spec)
	for _, f := range []string{"nodeName", "hostname", "subdomain"} {
		delete(spec, f)
	}
	spec["schedulerName"] = sched
	return map[string]any{"metadata": map[string]any{"labels": labels}, "spec": spec}
}

func runtimeDeepCopy(m map[string]any) map[string]any {
	return (&unstructured.Unstructured{Object: m}).DeepCopy().Object
}

// catReplayClient is a dynamic client acting as catReplayUser (with the
// admin's rights: impersonation keeps the groups given here).
func catReplayClient(t testing.TB) dynamic.Interface {
	t.Helper()
	cfg := rest.CopyConfig(controlPlane.RestConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: catReplayUser, Groups: []string{"system:masters", "system:authenticated"}}
	c, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var (
	catVAPGVR        = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"}
	catVAPBindingGVR = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicybindings"}
)

// catFencePods installs the admission policy of step 1 for ns and waits
// until it refuses a pod from anyone else. The returned func removes it.
func catFencePods(t testing.TB, ns string) (remove func()) {
	t.Helper()
	ctx := context.Background()
	name := "muster-e2e-replay-" + ns
	policy := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"failurePolicy": "Fail",
			"matchConstraints": map[string]any{"resourceRules": []any{map[string]any{
				"apiGroups": []any{""}, "apiVersions": []any{"v1"}, "operations": []any{"CREATE"}, "resources": []any{"pods"},
			}}},
			"validations": []any{map[string]any{
				"expression": fmt.Sprintf("request.userInfo.username == %q", catReplayUser),
				"message":    "fixture replay in progress: only the replay creates pods here",
			}},
		},
	}}
	binding := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"policyName":        name,
			"validationActions": []any{"Deny"},
			"matchResources": map[string]any{"namespaceSelector": map[string]any{
				"matchLabels": map[string]any{"kubernetes.io/metadata.name": ns},
			}},
		},
	}}
	if _, err := controlPlane.Dynamic.Resource(catVAPGVR).Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := controlPlane.Dynamic.Resource(catVAPBindingGVR).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	removed := false
	remove = func() {
		if removed {
			return
		}
		removed = true
		for _, gvr := range []schema.GroupVersionResource{catVAPBindingGVR, catVAPGVR} {
			if err := controlPlane.Dynamic.Resource(gvr).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				t.Errorf("lifting the replay policy: %v", err)
			}
		}
		// Wait until the policy is gone from the API server's view, so a
		// later scale-up is not refused.
		err := localcluster.WaitFor(ctx, time.Minute, "replay policy lifted in "+ns, func(ctx context.Context) (bool, string, error) {
			err := catProbePod(ctx, ns)
			return err == nil, fmt.Sprint(err), nil
		})
		if err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(remove)
	err := localcluster.WaitFor(ctx, time.Minute, "replay policy in force in "+ns, func(ctx context.Context) (bool, string, error) {
		err := catProbePod(ctx, ns)
		return apierrors.IsInvalid(err) || apierrors.IsForbidden(err), fmt.Sprint(err), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return remove
}

// catProbePod dry-run creates a pod in ns as the admin.
func catProbePod(ctx context.Context, ns string) error {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "replay-probe-"},
		Spec:       corev1.PodSpec{SchedulerName: "none", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
	_, err := controlPlane.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}

// catReplay replays f into ns (steps 1 to 4 above). Pods get schedulerName
// sched.
func catReplay(t testing.TB, ns, sched string, f *catFixture) *catReplayed {
	t.Helper()
	ctx := context.Background()
	removeFence := catFencePods(t, ns)
	r := newCatReplayer(t, ns, sched, f)
	createInOwnerOrder(t, f.name, f.root, append(append([]*unstructured.Unstructured{}, f.children...), f.pods...), r.create)
	r.out.root = r.out.byKey[catKey(f.root)]

	// Step 4: every controller has counted the fixture pods.
	r.waitCounted(ctx)
	removeFence()
	catAssertExactPods(t, ns, f, len(r.replicaSets))
	return r.out
}

// catExpectedPodGroupName states the pod-grouper's naming rule for a gang
// of a fixture: "<workload>" for a whole-workload gang that is its
// definition's only gang (or named after the root component), otherwise
// "<workload>-<gang>[-<key>...]".
func catExpectedPodGroupName(t testing.TB, defName, workload, gang string, keys []string) string {
	t.Helper()
	kartas, err := catalog.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	var k *kartav1alpha1.Karta
	for _, c := range kartas {
		if c.Name == defName {
			k = c
		}
	}
	if k == nil {
		t.Fatalf("no catalog definition %s", defName)
	}
	gangs := 0
	if oi := k.Spec.OptimizationInstructions; oi != nil && oi.GangScheduling != nil {
		gangs = len(oi.GangScheduling.PodGroups)
		if oi.GangScheduling.PodGroup != nil {
			gangs++
		}
	}
	if len(keys) == 0 && (gangs == 1 || gang == k.Spec.StructureDefinition.RootComponent.Name) {
		return workload
	}
	return strings.Join(append([]string{workload, gang}, keys...), "-")
}

// catCheckFixture runs the pod-grouper fixture check and then checks every
// PodGroup's name against the naming rule.
func catCheckFixture(t *testing.T, f *catFixture, ns string) {
	t.Helper()
	pgrCheckFixture(t, ns, f.name, f.root.GetName(), f.want)
	names := podGroupNames(t, ns)
	have := map[string]bool{}
	for _, name := range names {
		have[name] = true
	}
	gangsWithPods := map[string]bool{}
	for _, p := range f.want.Pods {
		gangsWithPods[p.Gang] = true
	}
	var want []string
	for _, g := range f.want.Gangs {
		if !gangsWithPods[strings.Join(append([]string{g.Definition}, g.Keys...), "/")] {
			continue
		}
		name := catExpectedPodGroupName(t, f.name, f.root.GetName(), g.Definition, g.Keys)
		want = append(want, name)
		if !have[name] {
			t.Errorf("%s: no PodGroup %s for gang %s %v", f.name, name, g.Definition, g.Keys)
		}
	}
	if len(names) != len(want) {
		t.Errorf("%s: PodGroups %v, want %v", f.name, names, want)
	}
}

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/kubernetes/pkg/controller/clusterroleaggregation"
	"k8s.io/utils/ptr"

	kartav1alpha1 "github.com/muster-io/muster/api/v1alpha1"
	"github.com/muster-io/muster/catalog"
	"github.com/muster-io/muster/hack/rbacgen"
	"github.com/muster-io/muster/localcluster"
	"github.com/muster-io/muster/test/manifestrender"
)

// The install tests run on a control plane of their own: the shared one
// authorizes everything (AlwaysAllow), and RBAC is what is under test here.
// This one runs with --authorization-mode=Node,RBAC and an audit log, so
// every request muster makes under its service accounts, and every
// Forbidden answer, is on record whichever client made it.

const (
	podgrouperSA = "system:serviceaccount:muster-system:muster-podgrouper"
	schedulerSA  = "system:serviceaccount:muster-system:muster-scheduler"
)

// startRBACControlPlane starts the RBAC control plane (stopped when t
// ends) and installs the CRDs muster ships plus permissive CRDs for the two
// workload frameworks the run uses and for cert-manager's kinds (native
// mode's cert-manager variant). It returns the audit log's path.
func startRBACControlPlane(t *testing.T) (*localcluster.ControlPlane, string) {
	t.Helper()
	dir := t.TempDir()
	policy := filepath.Join(dir, "audit-policy.yaml")
	audit := filepath.Join(dir, "audit.log")
	if err := os.WriteFile(policy, []byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cp, err := localcluster.Start(localcluster.Options{
		NativePodGroups: true, // as the shared one: the scheduler's native-gang rules are exercised
		APIServerFlags: []string{
			"--authorization-mode=Node,RBAC",
			"--audit-policy-file=" + policy,
			"--audit-log-path=" + audit,
			"--audit-log-mode=blocking",
		},
	})
	if err != nil {
		t.Fatalf("RBAC control plane: %v", err)
	}
	t.Cleanup(cp.Stop)
	ctx := context.Background()
	crds := shippedCRDs(t)
	crds = append(crds,
		localcluster.PermissiveCRD("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets", apiextensionsv1.NamespaceScoped),
		localcluster.PermissiveCRD("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet", "leaderworkersets", apiextensionsv1.NamespaceScoped))
	crds = append(crds, certManagerCRDs()...)
	for _, crd := range crds {
		if err := cp.InstallCRD(ctx, crd); err != nil {
			t.Fatal(err)
		}
	}
	return cp, audit
}

// TestInstall checks the install manifests on a control plane of their own
// (see the comment at the top of the file). The subtests share it and run
// in order: the dry runs first, then the real install the others use, then
// native mode over it (install_native_test.go).
func TestInstall(t *testing.T) {
	cp, audit := startRBACControlPlane(t)
	t.Run("ManifestsApply", func(t *testing.T) { installManifestsApply(t, cp) })
	t.Run("NativeManifestsApply", func(t *testing.T) { installNativeManifestsApply(t, cp) })
	t.Run("BuiltinPlurals", func(t *testing.T) { installBuiltinPlurals(t, cp) })
	objs := installMuster(t, cp)
	t.Run("RBACLeastPrivilege", func(t *testing.T) { installRBACLeastPrivilege(t, cp) })
	t.Run("ComponentsRunUnderTheirRBAC", func(t *testing.T) { installComponentsRun(t, cp, audit, objs) })
	t.Run("AggregatedWorkloadRole", func(t *testing.T) { installAggregatedWorkloadRole(t, cp) })
	// Last: it installs a webhook configuration and labels muster-system.
	t.Run("Native", func(t *testing.T) { installNative(t, cp) })
}

// shippedCRDs are the CRDs of the kustomize set (manifests/crds). Until
// those exist, the PodGroup CRD of the scheduler-plugins module and a
// permissive Karta CRD stand in, so the RBAC run still covers both kinds.
func shippedCRDs(t testing.TB) []*apiextensionsv1.CustomResourceDefinition {
	objs, err := manifestrender.Kustomize(manifestsDir())
	if err != nil {
		t.Fatal(err)
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	have := map[string]bool{}
	for _, o := range objs {
		if o.GetKind() != "CustomResourceDefinition" {
			continue
		}
		data, err := json.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		crds, err := localcluster.DecodeCRDs(data)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, crds...)
		have[o.GetName()] = true
	}
	if !have["podgroups.scheduling.x-k8s.io"] {
		dir, err := moduleDir("sigs.k8s.io/scheduler-plugins")
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(filepath.Join(dir, "config", "crd", "bases", "scheduling.x-k8s.io_podgroups.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		crds, err := localcluster.DecodeCRDs(data)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, crds...)
	}
	if !have["kartas.run.ai"] {
		out = append(out, localcluster.PermissiveCRD(kartav1alpha1.Group, kartav1alpha1.Version, kartav1alpha1.Kind, "kartas", apiextensionsv1.ClusterScoped, "krt"))
	}
	return out
}

func manifestsDir() string { return filepath.Join("..", "..", "manifests") }

// apply server-side applies objs in install order; dryRun adds
// dryRun=All (CRDs and Namespaces are always applied for real: the other
// objects' dry run needs them to exist).
func apply(ctx context.Context, cp *localcluster.ControlPlane, objs []*unstructured.Unstructured, dryRun bool) error {
	var errs []error
	for _, o := range manifestrender.InstallOrder(objs) {
		o = o.DeepCopy()
		real := !dryRun || o.GetKind() == "CustomResourceDefinition" || o.GetKind() == "Namespace"
		ri, err := cp.ResourceFor(o, "")
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", manifestrender.Key(o), err))
			continue
		}
		data, err := json.Marshal(o.Object)
		if err != nil {
			return err
		}
		opts := metav1.PatchOptions{FieldManager: "muster-install-test", Force: ptr.To(true)}
		if !real {
			opts.DryRun = []string{metav1.DryRunAll}
		}
		if _, err := ri.Patch(ctx, o.GetName(), types.ApplyPatchType, data, opts); err != nil {
			errs = append(errs, fmt.Errorf("apply %s (dry run %v): %w", manifestrender.Key(o), !real, err))
		}
	}
	return errors.Join(errs...)
}

// installManifestsApply: every object of the kustomize set and of the
// Helm chart (defaults, and with the chart owning the Namespace) passes
// server-side apply with dryRun=All on a real apiserver (validation,
// defaulting, admission), after the CRDs are in for real.
func installManifestsApply(t *testing.T, cp *localcluster.ControlPlane) {
	ctx := context.Background()
	kobjs, err := manifestrender.Kustomize(manifestsDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := apply(ctx, cp, kobjs, true); err != nil {
		t.Errorf("kustomize set: %v", err)
	}
	for _, values := range []map[string]any{nil, {"namespace": map[string]any{"create": true}}} {
		hobjs, err := manifestrender.Helm(filepath.Join(manifestsDir(), "helm", "muster"), values)
		if err != nil {
			t.Fatal(err)
		}
		if len(hobjs) < 20 {
			t.Fatalf("helm rendered only %d objects", len(hobjs))
		}
		if values == nil {
			// --create-namespace makes it; the apply needs it first.
			hobjs = append(hobjs, &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": manifestrender.Namespace}}})
		}
		if err := apply(ctx, cp, hobjs, true); err != nil {
			t.Errorf("helm chart (values %v): %v", values, err)
		}
	}
}

// installBuiltinPlurals: the generated role names built-in kinds by the
// resource this apiserver serves them under (the corpus test in
// hack/rbacgen covers the CRD kinds).
func installBuiltinPlurals(t *testing.T, cp *localcluster.ControlPlane) {
	defs, err := catalog.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	kinds, err := rbacgen.Kinds(defs)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, k := range kinds {
		m, err := cp.RESTMapping(k.GVK)
		if err != nil {
			continue // a framework's kind; no CRD here
		}
		checked++
		if m.Resource.Resource != k.Resource.Resource {
			t.Errorf("%s: generated resource %q, the apiserver serves %q", k.GVK, k.Resource.Resource, m.Resource.Resource)
		}
	}
	if checked < 10 {
		t.Errorf("only %d catalog kinds are served here; expected the built-in ones", checked)
	}
}

// installMuster applies the kustomize set for real.
func installMuster(t *testing.T, cp *localcluster.ControlPlane) []*unstructured.Unstructured {
	t.Helper()
	objs, err := manifestrender.Kustomize(manifestsDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := apply(context.Background(), cp, objs, false); err != nil {
		t.Fatal(err)
	}
	return objs
}

func sar(t *testing.T, cp *localcluster.ControlPlane, user string, ra authorizationv1.ResourceAttributes) bool {
	t.Helper()
	parts := strings.Split(user, ":")
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + parts[2], "system:authenticated"}
	r, err := cp.Client.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: groups, ResourceAttributes: &ra},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return r.Status.Allowed
}

// installRBACLeastPrivilege asks the apiserver's authorizer what each
// service account may do under the installed RBAC: what the components need
// is allowed, what they must never do is denied.
func installRBACLeastPrivilege(t *testing.T, cp *localcluster.ControlPlane) {
	type ra = authorizationv1.ResourceAttributes
	for _, tc := range []struct {
		user string
		attr ra
		want bool
	}{
		// pod-grouper
		{podgrouperSA, ra{Verb: "watch", Resource: "pods"}, true},
		{podgrouperSA, ra{Verb: "patch", Resource: "pods", Namespace: "team-a"}, true},
		{podgrouperSA, ra{Verb: "create", Group: "scheduling.x-k8s.io", Resource: "podgroups", Namespace: "team-a"}, true},
		{podgrouperSA, ra{Verb: "list", Group: "jobset.x-k8s.io", Resource: "jobsets"}, true},
		{podgrouperSA, ra{Verb: "get", Group: "apps", Resource: "statefulsets", Namespace: "team-a"}, true},
		{podgrouperSA, ra{Verb: "get", Group: "ray.io", Resource: "rayclusters", Namespace: "team-a"}, true},
		{podgrouperSA, ra{Verb: "update", Group: "run.ai", Resource: "kartas", Subresource: "status"}, true},
		{podgrouperSA, ra{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: "muster-system", Name: "muster-podgrouper"}, true},
		{podgrouperSA, ra{Verb: "create", Resource: "events", Namespace: "team-a"}, true},
		{podgrouperSA, ra{Verb: "list", Resource: "secrets"}, false},
		{podgrouperSA, ra{Verb: "create", Resource: "pods", Namespace: "team-a"}, false},
		{podgrouperSA, ra{Verb: "update", Resource: "pods", Namespace: "team-a"}, false},
		{podgrouperSA, ra{Verb: "delete", Group: "scheduling.x-k8s.io", Resource: "podgroups", Namespace: "team-a"}, false},
		{podgrouperSA, ra{Verb: "update", Group: "scheduling.x-k8s.io", Resource: "podgroups", Subresource: "status", Namespace: "team-a"}, false},
		{podgrouperSA, ra{Verb: "update", Group: "jobset.x-k8s.io", Resource: "jobsets", Namespace: "team-a"}, false},
		{podgrouperSA, ra{Verb: "update", Group: "run.ai", Resource: "kartas"}, false},
		{podgrouperSA, ra{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: "kube-system", Name: "kube-scheduler"}, false},
		{podgrouperSA, ra{Verb: "create", Resource: "pods", Subresource: "binding", Namespace: "team-a"}, false},
		// scheduler
		{schedulerSA, ra{Verb: "create", Resource: "pods", Subresource: "binding", Namespace: "team-a"}, true},
		{schedulerSA, ra{Verb: "watch", Group: "scheduling.x-k8s.io", Resource: "podgroups"}, true},
		{schedulerSA, ra{Verb: "patch", Group: "scheduling.x-k8s.io", Resource: "podgroups", Subresource: "status", Namespace: "team-a"}, true},
		{schedulerSA, ra{Verb: "list", Group: "scheduling.k8s.io", Resource: "podgroups"}, true},
		{schedulerSA, ra{Verb: "delete", Resource: "pods", Namespace: "team-a"}, true},
		{schedulerSA, ra{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: "kube-system", Name: "muster-scheduler"}, true},
		{schedulerSA, ra{Verb: "get", Resource: "configmaps", Namespace: "kube-system", Name: "extension-apiserver-authentication"}, true},
		{schedulerSA, ra{Verb: "create", Group: "authentication.k8s.io", Resource: "tokenreviews"}, true},
		{schedulerSA, ra{Verb: "create", Group: "scheduling.x-k8s.io", Resource: "podgroups", Namespace: "team-a"}, false},
		{schedulerSA, ra{Verb: "patch", Resource: "pods", Namespace: "team-a"}, false},
		{schedulerSA, ra{Verb: "list", Resource: "secrets"}, false},
		{schedulerSA, ra{Verb: "list", Group: "jobset.x-k8s.io", Resource: "jobsets"}, false},
	} {
		a := tc.attr
		name := fmt.Sprintf("%s %s %s.%s/%s %s/%s", strings.TrimPrefix(tc.user, "system:serviceaccount:muster-system:"), a.Verb, a.Resource, a.Group, a.Subresource, a.Namespace, a.Name)
		if got := sar(t, cp, tc.user, a); got != tc.want {
			t.Errorf("%s: allowed=%v, want %v", name, got, tc.want)
		}
	}
}

// installAggregatedWorkloadRole follows the README's recipe for a kind
// muster's catalog does not know: a ClusterRole labelled
// muster.io/aggregate-to-podgrouper=true is folded into
// muster-podgrouper-workloads by kube-controller-manager's aggregation
// controller (run here for real), and the pod-grouper may read the kind,
// without an edit to muster's roles.
func installAggregatedWorkloadRole(t *testing.T, cp *localcluster.ControlPlane) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	widgets := authorizationv1.ResourceAttributes{Verb: "list", Group: "example.com", Resource: "widgets"}
	if sar(t, cp, podgrouperSA, widgets) {
		t.Fatal("the pod-grouper may list widgets before anyone granted it")
	}
	inf := informers.NewSharedInformerFactory(cp.Client, 0)
	agg := clusterroleaggregation.NewClusterRoleAggregation(inf.Rbac().V1().ClusterRoles(), cp.Client.RbacV1())
	inf.Start(ctx.Done())
	go agg.Run(ctx, 1)
	// Shutdown waits for the informers, which stop with ctx: cancel first.
	defer func() { cancel(); inf.Shutdown() }()

	_, err := cp.Client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "muster-podgrouper-widgets", Labels: map[string]string{"muster.io/aggregate-to-podgrouper": "true"}},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"example.com"}, Resources: []string{"widgets"}, Verbs: []string{"get", "list", "watch"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := cp.Client.RbacV1().ClusterRoles().Delete(context.Background(), "muster-podgrouper-widgets", metav1.DeleteOptions{}); err != nil {
			t.Error(err)
		}
	}()
	err = localcluster.WaitFor(ctx, localcluster.ShortTimeout, "widgets readable by the pod-grouper", func(ctx context.Context) (bool, string, error) {
		return sar(t, cp, podgrouperSA, widgets), "not yet aggregated", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	role, err := cp.Client.RbacV1().ClusterRoles().Get(ctx, "muster-podgrouper-workloads", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(role.Rules) != 1 || role.Rules[0].Resources[0] != "widgets" {
		t.Errorf("aggregated rules = %+v", role.Rules)
	}
	if sar(t, cp, podgrouperSA, authorizationv1.ResourceAttributes{Verb: "update", Group: "example.com", Resource: "widgets", Namespace: "x"}) {
		t.Error("the aggregated grant gave more than it said")
	}
}

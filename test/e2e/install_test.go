package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/pkg/controller/clusterroleaggregation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/muster-io/muster/api"
	kartav1alpha1 "github.com/muster-io/muster/api/v1alpha1"
	"github.com/muster-io/muster/catalog"
	podgrouperapp "github.com/muster-io/muster/cmd/muster-podgrouper/app"
	"github.com/muster-io/muster/hack/rbacgen"
	"github.com/muster-io/muster/localcluster"
	"github.com/muster-io/muster/plugins/gang"
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

// impersonating returns a kubeconfig file for cp that acts as user.
func impersonating(t *testing.T, cp *localcluster.ControlPlane, user string) (string, *rest.Config) {
	t.Helper()
	cfg := cp.RestConfig
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.TLSClientConfig.CAData, TLSServerName: cfg.TLSClientConfig.ServerName}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken, Impersonate: user}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.CurrentContext = "c"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	return path, rc
}

// auditEntry is the part of an audit event the run looks at.
type auditEntry struct {
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	ImpersonatedUser *struct {
		Username string `json:"username"`
	} `json:"impersonatedUser"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	Stage string `json:"stage"`
}

// auditByUser counts completed requests and lists the Forbidden ones per
// impersonated user.
func auditByUser(t *testing.T, path string) (requests map[string]int, forbidden map[string][]string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	requests, forbidden = map[string]int{}, map[string][]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var e auditEntry
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.ImpersonatedUser == nil || e.ResponseStatus == nil {
			continue
		}
		if e.Stage != "ResponseComplete" && e.Stage != "Panic" {
			continue
		}
		u := e.ImpersonatedUser.Username
		requests[u]++
		if e.ResponseStatus.Code == 403 {
			forbidden[u] = append(forbidden[u], e.Verb+" "+e.RequestURI)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return requests, forbidden
}

// installComponentsRun runs the pod-grouper (its real
// command, with the Deployment's arguments) and the scheduler (the
// kube-scheduler app path with the ConfigMap's configuration and the
// MusterGang plugin) as their service accounts, through impersonation, on a
// JobSet-shaped and an LWS-shaped workload. Both must do their whole job —
// PodGroups written, pods labelled, every pod bound, both leases taken —
// and the audit log must hold no Forbidden for either identity.
func installComponentsRun(t *testing.T, cp *localcluster.ControlPlane, auditPath string, objs []*unstructured.Unstructured) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var deploymentArgs map[string][]string
	var schedulerConfig []byte
	for _, o := range objs {
		switch {
		case o.GetKind() == "Deployment":
			deploymentArgs = map[string][]string{}
			cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			for _, c := range cs {
				cm := c.(map[string]any)
				args, _, _ := unstructured.NestedStringSlice(cm, "args")
				deploymentArgs[cm["name"].(string)] = args
			}
		case o.GetKind() == "ConfigMap" && o.GetName() == "muster-scheduler-config":
			s, _, _ := unstructured.NestedString(o.Object, "data", "scheduler-config.yaml")
			schedulerConfig = []byte(s)
		}
	}
	if deploymentArgs == nil || schedulerConfig == nil {
		t.Fatal("kustomize set has no Deployment or scheduler ConfigMap")
	}

	// The cluster's own controllers (not muster's) run as admin.
	if _, err := cp.StartControllers(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.StartPodSimulator(ctx, localcluster.PodSimulatorOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.CreateNodes(ctx, 3, func(i int) localcluster.NodeSpec {
		return localcluster.NodeSpec{Name: fmt.Sprintf("install-%d", i), CPU: 8}
	}); err != nil {
		t.Fatal(err)
	}

	// Pod-grouper: the shipped command with the Deployment's arguments;
	// only the kubeconfig (impersonation instead of the in-cluster token)
	// and the listen address differ.
	pgKubeconfig, _ := impersonating(t, cp, podgrouperSA)
	// The command applies its logging configuration, which is
	// process-global; a second run in this process must not fail on it.
	logsapi.ReapplyHandling = logsapi.ReapplyHandlingIgnoreUnchanged
	pgCmd := podgrouperapp.NewCommand()
	pgArgs := append([]string{}, deploymentArgs["muster-podgrouper"]...)
	pgArgs = append(pgArgs, "--kubeconfig="+pgKubeconfig, "--bind-address=127.0.0.1:0",
		"--leader-elect-lease-duration=2s", "--leader-elect-renew-deadline=1s", "--leader-elect-retry-period=200ms")
	pgCmd.SetArgs(pgArgs)
	pgDone := make(chan error, 1)
	go func() { pgDone <- pgCmd.ExecuteContext(ctx) }()
	defer func() {
		cancel()
		if err := <-pgDone; err != nil {
			t.Errorf("pod-grouper: %v", err)
		}
	}()

	// Scheduler: the ConfigMap's configuration through kube-scheduler's app
	// path. Leader election is taken below with the same Lease: app.Run
	// would exit the process when its context ends.
	// The Deployment's scheduler flags are kube-scheduler's.
	if err := app.NewSchedulerCommand().ParseFlags(deploymentArgs["muster-scheduler"]); err != nil {
		t.Errorf("muster-scheduler args %v: %v", deploymentArgs["muster-scheduler"], err)
	}
	var cfgDoc map[string]any
	if err := yaml.Unmarshal(schedulerConfig, &cfgDoc); err != nil {
		t.Fatal(err)
	}
	le := cfgDoc["leaderElection"].(map[string]any)
	leaseNS, leaseName := le["resourceNamespace"].(string), le["resourceName"].(string)
	schedKubeconfig, schedRC := impersonating(t, cp, schedulerSA)
	cfgDoc["clientConnection"] = map[string]any{"kubeconfig": schedKubeconfig, "qps": 1000, "burst": 2000}
	cfgDoc["leaderElection"] = map[string]any{"leaderElect": false}
	cfgYAML, err := yaml.Marshal(cfgDoc)
	if err != nil {
		t.Fatal(err)
	}
	stopSched, err := localcluster.StartSchedulerApp(ctx, cp, cfgYAML, app.WithPlugin(gang.Name, gang.New))
	if err != nil {
		t.Fatal(err)
	}
	defer stopSched()
	elected := make(chan struct{})
	schedCS := kubernetes.NewForConfigOrDie(schedRC)
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, leaseNS, leaseName, schedCS.CoreV1(), schedCS.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: "install-test"})
	if err != nil {
		t.Fatal(err)
	}
	go leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 200 * time.Millisecond, ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{OnStartedLeading: func(context.Context) { close(elected) }, OnStoppedLeading: func() {}},
	})

	ns, err := cp.NewNamespace(ctx, "install-")
	if err != nil {
		t.Fatal(err)
	}
	jsName := createInstallJobSet(t, cp, ns)
	lwsName := createInstallLWS(t, cp, ns)

	// Not fatal: on failure the audit log below usually says why.
	if _, err := cp.WaitPodsBound(ctx, ns, "", 6, localcluster.LongTimeout); err != nil {
		t.Error(err)
	}
	pgs, err := cp.Dynamic.Resource(schema.GroupVersionResource{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "podgroups"}).
		Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	minMember := map[string]int64{}
	for _, pg := range pgs.Items {
		m, _, _ := unstructured.NestedInt64(pg.Object, "spec", "minMember")
		minMember[pg.GetLabels()[api.LabelWorkloadName]] += m
	}
	if minMember[jsName] != 3 || minMember[lwsName] != 3 {
		t.Errorf("PodGroups min-member by workload = %v, want %s:3 %s:3", minMember, jsName, lwsName)
	}
	pods, err := cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Labels[api.LabelPodGroup] == "" {
			t.Errorf("pod %s bound but not labelled with its PodGroup", p.Name)
		}
	}
	select {
	case <-elected:
	case <-time.After(localcluster.ShortTimeout):
		t.Errorf("the scheduler's identity could not take lease %s/%s", leaseNS, leaseName)
	}
	err = localcluster.WaitFor(ctx, localcluster.ShortTimeout, "pod-grouper lease", func(ctx context.Context) (bool, string, error) {
		l, err := cp.Client.CoordinationV1().Leases(manifestrender.Namespace).Get(ctx, "muster-podgrouper", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, "no lease", nil
		}
		if err != nil {
			return false, "", err
		}
		return l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "", "no holder", nil
	})
	if err != nil {
		t.Error(err)
	}

	// Stop both, then read the audit log: every request they made is in.
	cancel()
	stopSched()
	requests, forbidden := auditByUser(t, auditPath)
	for _, u := range []string{podgrouperSA, schedulerSA} {
		t.Logf("%s: %d requests, %d Forbidden", u, requests[u], len(forbidden[u]))
		if requests[u] == 0 {
			t.Errorf("%s made no request: the audit log does not see it", u)
		}
		if len(forbidden[u]) > 0 {
			sort.Strings(forbidden[u])
			t.Errorf("%s was refused %d request(s):\n  %s", u, len(forbidden[u]), strings.Join(forbidden[u], "\n  "))
		}
	}
}

func installPodTemplate(restartPolicy string, labels map[string]any) map[string]any {
	return map[string]any{
		"metadata": map[string]any{"labels": labels},
		"spec": map[string]any{
			"schedulerName": "muster-scheduler",
			"restartPolicy": restartPolicy,
			"containers": []any{map[string]any{"name": "main", "image": "registry.invalid/main",
				"resources": map[string]any{"requests": map[string]any{"cpu": "1", "memory": "1Gi"}}}},
		},
	}
}

// createInstallJobSet creates a JobSet of a leader and two workers and, as
// the JobSet operator would, one Job per replica owned by it; the Job
// controller makes the pods. Returns its name.
func createInstallJobSet(t *testing.T, cp *localcluster.ControlPlane, ns string) string {
	t.Helper()
	ctx := context.Background()
	jobSpec := func() map[string]any {
		return map[string]any{"parallelism": int64(1), "completions": int64(1), "backoffLimit": int64(0),
			"template": installPodTemplate("Never", map[string]any{})}
	}
	js := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
		"metadata": map[string]any{"name": "train", "namespace": ns},
		"spec": map[string]any{"replicatedJobs": []any{
			map[string]any{"name": "leader", "replicas": int64(1), "template": map[string]any{"spec": jobSpec()}},
			map[string]any{"name": "workers", "replicas": int64(2), "template": map[string]any{"spec": jobSpec()}},
		}},
	}}
	created, err := cp.Create(ctx, js, ns)
	if err != nil {
		t.Fatal(err)
	}
	owner := metav1.OwnerReference{APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet", Name: created.GetName(), UID: created.GetUID(), Controller: ptr.To(true)}
	global := 0
	for _, rj := range []struct {
		name     string
		replicas int
	}{{"leader", 1}, {"workers", 2}} {
		for j := range rj.replicas {
			labels := map[string]any{
				"jobset.sigs.k8s.io/jobset-name":        created.GetName(),
				"jobset.sigs.k8s.io/replicatedjob-name": rj.name,
				"jobset.sigs.k8s.io/job-index":          fmt.Sprint(j),
				"jobset.sigs.k8s.io/job-global-index":   fmt.Sprint(global),
			}
			global++
			spec := jobSpec()
			spec["template"] = installPodTemplate("Never", labels)
			job := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "batch/v1", "kind": "Job",
				"metadata": map[string]any{"name": fmt.Sprintf("%s-%s-%d", created.GetName(), rj.name, j), "labels": labels},
				"spec":     spec}}
			job.SetOwnerReferences([]metav1.OwnerReference{owner})
			if _, err := cp.Create(ctx, job, ns); err != nil {
				t.Fatal(err)
			}
		}
	}
	return created.GetName()
}

// createInstallLWS creates a LeaderWorkerSet of one group of size 3 and, as
// its operator would, the leader StatefulSet (owned by the LWS) and, once
// the leader pod exists, the group's worker StatefulSet owned by the
// leader pod. The StatefulSet controller makes the pods. Returns its name.
func createInstallLWS(t *testing.T, cp *localcluster.ControlPlane, ns string) string {
	t.Helper()
	ctx := context.Background()
	const name = "serve"
	lws := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{"replicas": int64(1), "leaderWorkerTemplate": map[string]any{
			"size": int64(3), "workerTemplate": installPodTemplate("Always", map[string]any{})}},
	}}
	created, err := cp.Create(ctx, lws, ns)
	if err != nil {
		t.Fatal(err)
	}
	sts := func(stsName string, replicas int64, labels map[string]any, owner metav1.OwnerReference) {
		t.Helper()
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "StatefulSet",
			"metadata": map[string]any{"name": stsName},
			"spec": map[string]any{
				"replicas": replicas, "serviceName": name, "podManagementPolicy": "Parallel",
				"selector": map[string]any{"matchLabels": labels},
				"template": installPodTemplate("Always", labels),
			}}}
		obj.SetOwnerReferences([]metav1.OwnerReference{owner})
		if _, err := cp.Create(ctx, obj, ns); err != nil {
			t.Fatal(err)
		}
	}
	// One group (index 0): the leader's labels are fixed, which the
	// operator's pod webhook would otherwise set per pod.
	sts(name, 1, map[string]any{
		"leaderworkerset.sigs.k8s.io/name": name, "leaderworkerset.sigs.k8s.io/group-index": "0", "leaderworkerset.sigs.k8s.io/worker-index": "0",
	}, metav1.OwnerReference{APIVersion: "leaderworkerset.x-k8s.io/v1", Kind: "LeaderWorkerSet", Name: name, UID: created.GetUID(), Controller: ptr.To(true)})
	leaders, err := cp.WaitPodCount(ctx, ns, "leaderworkerset.sigs.k8s.io/worker-index=0", 1, localcluster.ShortTimeout)
	if err != nil {
		t.Fatal(err)
	}
	leader := leaders[0]
	sts(name+"-0", 2, map[string]any{
		"leaderworkerset.sigs.k8s.io/name": name, "leaderworkerset.sigs.k8s.io/group-index": "0", "leaderworkerset.sigs.k8s.io/worker-index": "1",
	}, metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: leader.Name, UID: leader.UID, Controller: ptr.To(true)})
	return name
}

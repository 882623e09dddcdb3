// The tests of native mode's install (docs/native-gangs.md): the kustomize
// Components manifests/components/native and native-cert-manager, added to
// the base as a user's kustomization does, and the chart's podGrouper
// values, which must render the same objects.
package manifestrender_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/test/manifestrender"
)

const (
	nativeComponent      = "components/native"
	certManagerComponent = "components/native-cert-manager"

	webhookConfig  = "muster-podgrouper"
	webhookService = "muster-podgrouper-webhook"
	webhookSecret  = "muster-podgrouper-webhook-tls"
	podgrouperSA   = "muster-podgrouper"
)

func withComponent(t *testing.T, component string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := manifestrender.KustomizeComponents(t.TempDir(), ".", component)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// nativeValues are chart values for podGroupAPI api, with cert-manager on
// or off and any further podGrouper.webhook.certManager values.
func nativeValues(api string, certManager bool, extra map[string]any) map[string]any {
	cm := map[string]any{"enabled": certManager}
	for k, v := range extra {
		cm[k] = v
	}
	return map[string]any{"podGrouper": map[string]any{"podGroupAPI": api, "webhook": map[string]any{"certManager": cm}}}
}

// TestNativeComponentObjects pins what each Component adds to the base and
// that it changes no base object but the Deployment, and in the Deployment
// only the pod-grouper container and the pod's volumes.
func TestNativeComponentObjects(t *testing.T) {
	common := []string{
		"/Service/muster-system/muster-podgrouper-webhook",
		"admissionregistration.k8s.io/MutatingWebhookConfiguration//muster-podgrouper",
		"rbac.authorization.k8s.io/ClusterRole//muster-podgrouper-native",
		"rbac.authorization.k8s.io/ClusterRoleBinding//muster-podgrouper-native",
	}
	base, err := manifestrender.ByKey(kustomized(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		component string
		added     []string
	}{
		{nativeComponent, append([]string{
			"rbac.authorization.k8s.io/ClusterRole//muster-podgrouper-webhook-ca",
			"rbac.authorization.k8s.io/ClusterRoleBinding//muster-podgrouper-webhook-ca",
			"rbac.authorization.k8s.io/Role/muster-system/muster-podgrouper-webhook-tls",
			"rbac.authorization.k8s.io/RoleBinding/muster-system/muster-podgrouper-webhook-tls",
		}, common...)},
		{certManagerComponent, append([]string{
			"cert-manager.io/Certificate/muster-system/muster-podgrouper-webhook",
			"cert-manager.io/Issuer/muster-system/muster-podgrouper-webhook",
		}, common...)},
	} {
		t.Run(tc.component, func(t *testing.T) {
			got, err := manifestrender.ByKey(withComponent(t, tc.component))
			if err != nil {
				t.Fatal(err)
			}
			var added []string
			for key := range got {
				if _, ok := base[key]; !ok {
					added = append(added, key)
				}
			}
			sort.Strings(added)
			sort.Strings(tc.added)
			if d := cmp.Diff(tc.added, added); d != "" {
				t.Errorf("objects the component adds (-want +got):\n%s", d)
			}
			for key, b := range base {
				o, ok := got[key]
				switch {
				case !ok:
					t.Errorf("%s: removed by the component", key)
				case b.GetKind() == "Deployment":
					bd, od := convert[appsv1.Deployment](t, b), convert[appsv1.Deployment](t, o)
					if d := cmp.Diff(*container(t, bd, "muster-scheduler"), *container(t, od, "muster-scheduler")); d != "" {
						t.Errorf("the component changes the scheduler container:\n%s", d)
					}
					bd.Spec.Template.Spec.Containers, od.Spec.Template.Spec.Containers = nil, nil
					bd.Spec.Template.Spec.Volumes, od.Spec.Template.Spec.Volumes = nil, nil
					if d := cmp.Diff(bd, od); d != "" {
						t.Errorf("the component changes the Deployment beyond the pod-grouper and volumes:\n%s", d)
					}
				default:
					if d := cmp.Diff(b.Object, o.Object); d != "" {
						t.Errorf("%s: changed by the component:\n%s", key, d)
					}
				}
			}
		})
	}
	// The base stays scheduler-plugins mode: no native flag.
	dep := convert[appsv1.Deployment](t, base["apps/Deployment/muster-system/muster-scheduler"])
	for _, a := range container(t, dep, "muster-podgrouper").Args {
		if strings.HasPrefix(a, "--podgroup-api") || strings.HasPrefix(a, "--webhook-") {
			t.Errorf("base pod-grouper has native flag %s", a)
		}
	}
}

// TestNativeHelmMatchesKustomize: podGroupAPI=native renders what
// components/native adds, certManager.enabled what native-cert-manager does.
func TestNativeHelmMatchesKustomize(t *testing.T) {
	for _, tc := range []struct {
		component string
		values    map[string]any
	}{
		{nativeComponent, nativeValues("native", false, nil)},
		{certManagerComponent, nativeValues("native", true, nil)},
	} {
		t.Run(tc.component, func(t *testing.T) {
			sameObjects(t, withComponent(t, tc.component), helmRendered(t, tc.values), []string{"/Namespace//muster-system"})
		})
	}
}

// nativeVariant is one way to install native mode.
type nativeVariant struct {
	name        string
	objs        []*unstructured.Unstructured
	api         string // the --podgroup-api value
	certManager bool
	issuer      map[string]any // the Certificate's issuerRef; nil: the rendered Issuer
}

func nativeVariants(t *testing.T) []nativeVariant {
	clusterIssuer := map[string]any{"kind": "ClusterIssuer", "name": "corp-ca", "group": "cert-manager.io"}
	return []nativeVariant{
		{name: "kustomize native", objs: withComponent(t, nativeComponent), api: "native"},
		{name: "kustomize cert-manager", objs: withComponent(t, certManagerComponent), api: "native", certManager: true},
		{name: "helm native", objs: helmRendered(t, nativeValues("native", false, nil)), api: "native"},
		{name: "helm auto", objs: helmRendered(t, nativeValues("auto", false, nil)), api: "auto"},
		{name: "helm cert-manager", objs: helmRendered(t, nativeValues("auto", true, nil)), api: "auto", certManager: true},
		{name: "helm cert-manager, own issuer", objs: helmRendered(t, nativeValues("native", true, map[string]any{"issuerRef": clusterIssuer})),
			api: "native", certManager: true, issuer: clusterIssuer},
	}
}

// TestNativeWebhook checks the webhook configuration, its Service and the
// pod-grouper's flags of every variant against each other and against the
// contract: the Service reaches the pod-grouper's webhook port, the flags
// name the objects the RBAC grants, only opted-in namespaces depend on it.
func TestNativeWebhook(t *testing.T) {
	ns := manifestrender.Namespace
	for _, v := range nativeVariants(t) {
		t.Run(v.name, func(t *testing.T) {
			mwc := convert[admissionv1.MutatingWebhookConfiguration](t, find(t, v.objs, "MutatingWebhookConfiguration", "", webhookConfig))
			checkWebhook(t, mwc)
			svc := convert[corev1.Service](t, find(t, v.objs, "Service", ns, webhookService))
			dep := convert[appsv1.Deployment](t, find(t, v.objs, "Deployment", ns, "muster-scheduler"))
			checkService(t, svc, dep, 9443)

			pg := container(t, dep, "muster-podgrouper")
			args := flags(t, pg.Args)
			if args["--podgroup-api"] != v.api || args["--native-scheduler-name"] != "default-scheduler" || args["--webhook-bind-address"] != ":9443" {
				t.Errorf("pod-grouper args %v: want --podgroup-api=%s, --native-scheduler-name=default-scheduler, --webhook-bind-address=:9443", pg.Args, v.api)
			}
			if !hasArg(pg.Args, "--scheduler-name=muster-scheduler") {
				t.Errorf("pod-grouper args %v lost --scheduler-name", pg.Args)
			}
			selfManaged := []string{"--webhook-dns-name", "--webhook-secret", "--webhook-configuration"}
			if v.certManager {
				checkCertManager(t, v, mwc, dep, args)
				for _, f := range selfManaged {
					if _, ok := args[f]; ok {
						t.Errorf("cert-manager variant passes the self-managed flag %s", f)
					}
				}
				return
			}
			if _, ok := args["--webhook-cert-dir"]; ok || len(mwc.Annotations) > 0 {
				t.Errorf("self-managed variant has --webhook-cert-dir or annotations %v", mwc.Annotations)
			}
			if want := map[string]string{
				"--webhook-dns-name":      webhookService + "." + ns + ".svc",
				"--webhook-secret":        ns + "/" + webhookSecret,
				"--webhook-configuration": webhookConfig,
			}; !cmpSubset(args, want) {
				t.Errorf("pod-grouper args %v, want %v", pg.Args, want)
			}
		})
	}
}

// checkWebhook holds the one webhook to the fields native mode needs.
func checkWebhook(t *testing.T, mwc *admissionv1.MutatingWebhookConfiguration) {
	t.Helper()
	if len(mwc.Webhooks) != 1 {
		t.Fatalf("%d webhooks, want 1", len(mwc.Webhooks))
	}
	w := mwc.Webhooks[0]
	want := admissionv1.MutatingWebhook{
		Name:                    "pods.native.muster.io",
		AdmissionReviewVersions: []string{"v1"},
		ClientConfig: admissionv1.WebhookClientConfig{Service: &admissionv1.ServiceReference{
			Namespace: manifestrender.Namespace, Name: webhookService, Path: ptr.To("/mutate-v1-pod"), Port: ptr.To[int32](443)}},
		Rules: []admissionv1.RuleWithOperations{{
			Operations: []admissionv1.OperationType{admissionv1.Create},
			Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"},
				Scope: ptr.To(admissionv1.NamespacedScope)},
		}},
		FailurePolicy:      ptr.To(admissionv1.Fail),
		MatchPolicy:        ptr.To(admissionv1.Equivalent),
		SideEffects:        ptr.To(admissionv1.SideEffectClassNone),
		TimeoutSeconds:     ptr.To[int32](10),
		ReinvocationPolicy: ptr.To(admissionv1.NeverReinvocationPolicy),
		NamespaceSelector:  w.NamespaceSelector, // checked by what it selects, below
	}
	if d := cmp.Diff(want, w); d != "" {
		t.Errorf("webhook (-want +got):\n%s", d)
	}
	sel, err := metav1.LabelSelectorAsSelector(w.NamespaceSelector)
	if err != nil || w.NamespaceSelector == nil {
		t.Fatalf("namespaceSelector %v: %v", w.NamespaceSelector, err)
	}
	for _, tc := range []struct {
		ns, label string
		want      bool
	}{
		{"team-a", api.NativeGangsEnabled, true},
		{"team-a", "", false},
		{"team-a", "disabled", false},
		// muster's own pods never wait for the webhook they serve.
		{manifestrender.Namespace, api.NativeGangsEnabled, false},
	} {
		l := labels.Set{corev1.LabelMetadataName: tc.ns}
		if tc.label != "" {
			l[api.LabelNativeGangs] = tc.label
		}
		if got := sel.Matches(l); got != tc.want {
			t.Errorf("namespace %v selected = %v, want %v", l, got, tc.want)
		}
	}
}

// checkService: the Service selects the Deployment's pods and sends 443 to
// the pod-grouper's webhook port (port, the one --webhook-bind-address
// names), and to no other container.
func checkService(t *testing.T, svc *corev1.Service, dep *appsv1.Deployment, port int32) {
	t.Helper()
	if len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(dep.Spec.Template.Labels)) {
		t.Errorf("Service selector %v does not select the Deployment's pods %v", svc.Spec.Selector, dep.Spec.Template.Labels)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 443 {
		t.Fatalf("Service ports %+v, want one on 443", svc.Spec.Ports)
	}
	target := svc.Spec.Ports[0].TargetPort
	var resolved []string
	for _, c := range dep.Spec.Template.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == target.StrVal || p.ContainerPort == target.IntVal {
				resolved = append(resolved, fmt.Sprintf("%s:%d", c.Name, p.ContainerPort))
			}
		}
	}
	if want := []string{fmt.Sprintf("muster-podgrouper:%d", port)}; !cmp.Equal(want, resolved) {
		t.Errorf("Service targetPort %s reaches %v, want %v", target.String(), resolved, want)
	}
}

// checkCertManager: the Certificate covers the Service's name, its Secret
// is mounted where --webhook-cert-dir points, the cainjector is told which
// Certificate's CA to inject, and the issuer is the rendered one or the
// one given.
func checkCertManager(t *testing.T, v nativeVariant, mwc *admissionv1.MutatingWebhookConfiguration, dep *appsv1.Deployment, args map[string]string) {
	t.Helper()
	ns := manifestrender.Namespace
	cert := find(t, v.objs, "Certificate", ns, webhookService)
	if got, want := mwc.Annotations["cert-manager.io/inject-ca-from"], ns+"/"+cert.GetName(); got != want {
		t.Errorf("inject-ca-from = %q, want %q", got, want)
	}
	dns, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	if !hasArg(dns, webhookService+"."+ns+".svc") {
		t.Errorf("Certificate dnsNames %v lack the name the apiserver dials", dns)
	}
	secret, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	if secret == "" || secret == webhookSecret {
		t.Errorf("Certificate secretName %q: want one of its own (not the self-managed %s)", secret, webhookSecret)
	}
	dir := args["--webhook-cert-dir"]
	pg := container(t, dep, "muster-podgrouper")
	mounted := ""
	for _, m := range pg.VolumeMounts {
		if m.MountPath == dir && m.ReadOnly {
			for _, vol := range dep.Spec.Template.Spec.Volumes {
				if vol.Name == m.Name && vol.Secret != nil {
					mounted = vol.Secret.SecretName
				}
			}
		}
	}
	if dir == "" || mounted != secret {
		t.Errorf("--webhook-cert-dir=%q mounts Secret %q read-only, want the Certificate's %q", dir, mounted, secret)
	}
	issuer, _, _ := unstructured.NestedMap(cert.Object, "spec", "issuerRef")
	want := v.issuer
	if want == nil {
		is := find(t, v.objs, "Issuer", ns, webhookService)
		if _, ok, _ := unstructured.NestedMap(is.Object, "spec", "selfSigned"); !ok {
			t.Errorf("the rendered Issuer is not selfSigned: %v", is.Object["spec"])
		}
		want = map[string]any{"kind": "Issuer", "name": is.GetName()}
	} else {
		for _, o := range v.objs {
			if o.GetKind() == "Issuer" {
				t.Errorf("an issuerRef is given, yet the chart renders Issuer %s", o.GetName())
			}
		}
	}
	if d := cmp.Diff(want, issuer); d != "" {
		t.Errorf("Certificate issuerRef (-want +got):\n%s", d)
	}
}

// TestNativeRBAC pins native mode's grants: the native API in full, the
// self-managed certificate's Secret and webhook configuration by name only
// (create, which cannot be named, aside), all bound to the pod-grouper.
func TestNativeRBAC(t *testing.T) {
	ns := manifestrender.Namespace
	native := []rbacv1.PolicyRule{{APIGroups: []string{"scheduling.k8s.io"}, Resources: []string{"podgroups", "workloads"},
		Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}}
	tls := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{webhookSecret}, Verbs: []string{"get", "update", "delete"}},
	}
	ca := []rbacv1.PolicyRule{{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"mutatingwebhookconfigurations"},
		ResourceNames: []string{webhookConfig}, Verbs: []string{"get", "update", "patch"}}}
	for _, v := range nativeVariants(t) {
		t.Run(v.name, func(t *testing.T) {
			type role struct {
				kind, ns, name string
				rules          []rbacv1.PolicyRule
			}
			roles := []role{{"ClusterRole", "", "muster-podgrouper-native", native}}
			if !v.certManager {
				roles = append(roles, role{"Role", ns, webhookSecret, tls}, role{"ClusterRole", "", "muster-podgrouper-webhook-ca", ca})
			}
			for _, r := range roles {
				var got []rbacv1.PolicyRule
				if r.kind == "Role" {
					got = convert[rbacv1.Role](t, find(t, v.objs, r.kind, r.ns, r.name)).Rules
				} else {
					got = convert[rbacv1.ClusterRole](t, find(t, v.objs, r.kind, r.ns, r.name)).Rules
				}
				if d := cmp.Diff(r.rules, got); d != "" {
					t.Errorf("%s %s rules (-want +got):\n%s", r.kind, r.name, d)
				}
				b := find(t, v.objs, r.kind+"Binding", r.ns, r.name)
				ref, _, _ := unstructured.NestedMap(b.Object, "roleRef")
				subjects, _, _ := unstructured.NestedSlice(b.Object, "subjects")
				wantSub := []any{map[string]any{"kind": "ServiceAccount", "name": podgrouperSA, "namespace": ns}}
				if ref["kind"] != r.kind || ref["name"] != r.name || !cmp.Equal(wantSub, subjects) {
					t.Errorf("%sBinding %s binds %v to %v, want %s %s to %v", r.kind, r.name, ref, subjects, r.kind, r.name, wantSub)
				}
			}
		})
	}
}

// TestNativeHelmValues: the webhook's values reach the objects, and bad
// ones are refused at render time naming the value.
func TestNativeHelmValues(t *testing.T) {
	h := helmRendered(t, map[string]any{"podGrouper": map[string]any{
		"podGroupAPI":          "native",
		"nativeSchedulerNames": []any{"default-scheduler", "batch-scheduler"},
		"webhook":              map[string]any{"port": 8443, "timeoutSeconds": 5},
	}})
	dep := convert[appsv1.Deployment](t, find(t, h, "Deployment", manifestrender.Namespace, "muster-scheduler"))
	pg := container(t, dep, "muster-podgrouper")
	args := flags(t, pg.Args)
	if args["--webhook-bind-address"] != ":8443" || args["--native-scheduler-name"] != "default-scheduler,batch-scheduler" {
		t.Errorf("pod-grouper args %v do not follow the values", pg.Args)
	}
	checkService(t, convert[corev1.Service](t, find(t, h, "Service", manifestrender.Namespace, webhookService)), dep, 8443)
	if p := pg.Ports[len(pg.Ports)-1]; p.Name != "webhook" || p.ContainerPort != 8443 {
		t.Errorf("webhook port %+v, want 8443", p)
	}
	mwc := convert[admissionv1.MutatingWebhookConfiguration](t, find(t, h, "MutatingWebhookConfiguration", "", webhookConfig))
	if ts := mwc.Webhooks[0].TimeoutSeconds; ts == nil || *ts != 5 {
		t.Errorf("timeoutSeconds = %v, want 5", ts)
	}

	for _, tc := range []struct {
		name    string
		values  map[string]any
		wantErr string
	}{
		{"unknown API", map[string]any{"podGrouper": map[string]any{"podGroupAPI": "volcano"}}, "podGrouper.podGroupAPI must be scheduler-plugins, native or auto"},
		{"cert-manager without native", nativeValues("scheduler-plugins", true, nil), "podGrouper.webhook.certManager.enabled needs"},
		{"no native scheduler", map[string]any{"podGrouper": map[string]any{"podGroupAPI": "native", "nativeSchedulerNames": []any{}}}, "podGrouper.nativeSchedulerNames"},
		{"timeout over the apiserver's limit", map[string]any{"podGrouper": map[string]any{"podGroupAPI": "auto", "webhook": map[string]any{"timeoutSeconds": 31}}}, "podGrouper.webhook.timeoutSeconds must be 1..30"},
		{"privileged port", map[string]any{"podGrouper": map[string]any{"podGroupAPI": "native", "webhook": map[string]any{"port": 443}}}, "podGrouper.webhook.port must be 1024..65535"},
		{"the health port", map[string]any{"podGrouper": map[string]any{"podGroupAPI": "native", "webhook": map[string]any{"port": 10261}}}, "podGrouper.webhook.port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := manifestrender.Helm(chartDir, tc.values); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("err = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// flags maps each --name=value argument to its value; a flag given twice
// fails the test (the last would win silently).
func flags(t *testing.T, args []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, a := range args {
		name, value, _ := strings.Cut(a, "=")
		if _, dup := out[name]; dup {
			t.Errorf("flag %s given twice in %v", name, args)
		}
		out[name] = value
	}
	return out
}

func cmpSubset(got, want map[string]string) bool {
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

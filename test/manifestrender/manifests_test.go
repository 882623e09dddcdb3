// The tests of the shipped manifests (manifests/): rendered both ways a user
// installs them and compared, checked against the scheduler configuration,
// the chart's CRD copies and the Dockerfile. They run from the manifests
// directory, as a user's kubectl apply -k does.
package manifestrender_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/muster-io/muster/test/manifestrender"
)

const chartDir = "helm/muster"

func TestMain(m *testing.M) {
	if err := os.Chdir(filepath.Join("..", "..", "manifests")); err != nil {
		fmt.Fprintln(os.Stderr, "manifests directory:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func kustomized(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	objs, err := manifestrender.Kustomize(".")
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func helmRendered(t *testing.T, values map[string]any) []*unstructured.Unstructured {
	t.Helper()
	objs, err := manifestrender.Helm(chartDir, values)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func find(t *testing.T, objs []*unstructured.Unstructured, kind, ns, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetNamespace() == ns && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("%s %s/%s not rendered", kind, ns, name)
	return nil
}

func convert[T any](t *testing.T, o *unstructured.Unstructured) *T {
	t.Helper()
	var out T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, &out, true); err != nil {
		t.Fatalf("%s: %v", manifestrender.Key(o), err)
	}
	return &out
}

// TestKustomizeObjects pins the set of objects `kubectl apply -k manifests/`
// creates (CRDs come from crds/, owned elsewhere, and are checked by kind).
func TestKustomizeObjects(t *testing.T) {
	objs := kustomized(t)
	var got []string
	crds := 0
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			crds++
			continue
		}
		got = append(got, manifestrender.Key(o))
	}
	sort.Strings(got)
	want := []string{
		"/ConfigMap/muster-system/muster-scheduler-config",
		"/Namespace//muster-system",
		"/Secret/muster-system/muster-podgrouper-token",
		"/ServiceAccount/muster-system/muster-podgrouper",
		"/ServiceAccount/muster-system/muster-scheduler",
		"apps/Deployment/muster-system/muster-scheduler",
		"policy/PodDisruptionBudget/muster-system/muster-scheduler",
		"rbac.authorization.k8s.io/ClusterRole//muster-podgrouper",
		"rbac.authorization.k8s.io/ClusterRole//muster-podgrouper-catalog-read",
		"rbac.authorization.k8s.io/ClusterRole//muster-podgrouper-workloads",
		"rbac.authorization.k8s.io/ClusterRole//muster-scheduler",
		"rbac.authorization.k8s.io/ClusterRoleBinding//muster-podgrouper",
		"rbac.authorization.k8s.io/ClusterRoleBinding//muster-podgrouper-catalog-read",
		"rbac.authorization.k8s.io/ClusterRoleBinding//muster-podgrouper-workloads",
		"rbac.authorization.k8s.io/ClusterRoleBinding//muster-scheduler",
		"rbac.authorization.k8s.io/ClusterRoleBinding//muster-scheduler-kube-scheduler",
		"rbac.authorization.k8s.io/ClusterRoleBinding//muster-scheduler-volume-scheduler",
		"rbac.authorization.k8s.io/Role/kube-system/muster-scheduler-leader-election",
		"rbac.authorization.k8s.io/Role/muster-system/muster-podgrouper-leader-election",
		"rbac.authorization.k8s.io/RoleBinding/kube-system/muster-scheduler-extension-apiserver-authentication-reader",
		"rbac.authorization.k8s.io/RoleBinding/kube-system/muster-scheduler-leader-election",
		"rbac.authorization.k8s.io/RoleBinding/muster-system/muster-podgrouper-leader-election",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("kustomize objects (-want +got):\n%s", d)
	}
	if _, err := os.Stat("crds"); err == nil {
		files, _ := filepath.Glob("crds/*.yaml")
		if crds == 0 || len(files) == 0 {
			t.Errorf("manifests/crds has %d YAML files but kustomize renders %d CRDs: list them in kustomization.yaml", len(files), crds)
		}
	}
}

// TestConfigMapIsSchedulerConfig: the ConfigMap the Deployment mounts holds
// manifests/scheduler-config.yaml byte for byte.
func TestConfigMapIsSchedulerConfig(t *testing.T) {
	want, err := os.ReadFile("scheduler-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cm := convert[corev1.ConfigMap](t, find(t, kustomized(t), "ConfigMap", manifestrender.Namespace, "muster-scheduler-config"))
	if got := cm.Data["scheduler-config.yaml"]; got != string(want) {
		t.Errorf("ConfigMap data differs from scheduler-config.yaml:\n%s", cmp.Diff(string(want), got))
	}
	dep := convert[appsv1.Deployment](t, find(t, kustomized(t), "Deployment", manifestrender.Namespace, "muster-scheduler"))
	sched := container(t, dep, "muster-scheduler")
	if !hasArg(sched.Args, "--config=/etc/muster/scheduler-config.yaml") || !mounts(sched, "scheduler-config", "/etc/muster") {
		t.Errorf("scheduler container does not read /etc/muster/scheduler-config.yaml from the ConfigMap: args %v", sched.Args)
	}
}

// TestSchedulerLeaseRole keeps the kube-system Role equal to the Lease the
// configuration names: a renamed lease would otherwise leave the scheduler
// unable to elect.
func TestSchedulerLeaseRole(t *testing.T) {
	data, err := os.ReadFile("scheduler-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		LeaderElection struct {
			LeaderElect       bool   `json:"leaderElect"`
			ResourceName      string `json:"resourceName"`
			ResourceNamespace string `json:"resourceNamespace"`
			ResourceLock      string `json:"resourceLock"`
		} `json:"leaderElection"`
		Profiles []struct {
			SchedulerName string `json:"schedulerName"`
		} `json:"profiles"`
	}
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	le := cfg.LeaderElection
	if !le.LeaderElect || le.ResourceName == "" || le.ResourceName == "kube-scheduler" || le.ResourceLock != "leases" {
		t.Fatalf("scheduler-config.yaml: want leader election on with a lease of its own, got %+v", le)
	}
	ns := le.ResourceNamespace
	if ns == "" {
		ns = "kube-system"
	}
	objs := kustomized(t)
	role := convert[rbacv1.Role](t, find(t, objs, "Role", ns, "muster-scheduler-leader-election"))
	named := false
	for _, r := range role.Rules {
		if len(r.ResourceNames) == 1 && r.ResourceNames[0] == le.ResourceName && strings.Contains(strings.Join(r.Verbs, ","), "update") {
			named = true
		}
	}
	if !named {
		t.Errorf("Role %s/muster-scheduler-leader-election does not grant update on lease %s", ns, le.ResourceName)
	}
	find(t, objs, "RoleBinding", ns, "muster-scheduler-leader-election")

	// The pod-grouper groups the pods of the profile's scheduler name.
	dep := convert[appsv1.Deployment](t, find(t, objs, "Deployment", manifestrender.Namespace, "muster-scheduler"))
	if len(cfg.Profiles) != 1 || !hasArg(container(t, dep, "muster-podgrouper").Args, "--scheduler-name="+cfg.Profiles[0].SchedulerName) {
		t.Errorf("pod-grouper args %v do not name the profile's scheduler", container(t, dep, "muster-podgrouper").Args)
	}
}

func container(t *testing.T, dep *appsv1.Deployment, name string) *corev1.Container {
	t.Helper()
	for i := range dep.Spec.Template.Spec.Containers {
		if c := &dep.Spec.Template.Spec.Containers[i]; c.Name == name {
			return c
		}
	}
	t.Fatalf("Deployment %s has no container %s", dep.Name, name)
	return nil
}

func hasArg(args []string, want string) bool {
	for _, a := range args {
		if a == want {
			return true
		}
	}
	return false
}

func mounts(c *corev1.Container, volume, path string) bool {
	for _, m := range c.VolumeMounts {
		if m.Name == volume && m.MountPath == path {
			return true
		}
	}
	return false
}

// TestDeploymentHardening checks what the issue asks of the pod: two
// containers, probes, resources, a locked-down security context, separate
// identities, leader election.
func TestDeploymentHardening(t *testing.T) {
	dep := convert[appsv1.Deployment](t, find(t, kustomized(t), "Deployment", manifestrender.Namespace, "muster-scheduler"))
	ps := dep.Spec.Template.Spec
	if len(ps.Containers) != 2 {
		t.Fatalf("containers = %d, want 2 (scheduler + pod-grouper)", len(ps.Containers))
	}
	if ps.ServiceAccountName != "muster-scheduler" {
		t.Errorf("serviceAccountName = %q", ps.ServiceAccountName)
	}
	if ps.AutomountServiceAccountToken == nil || *ps.AutomountServiceAccountToken {
		t.Errorf("the pod must not automount its token: each container mounts its own")
	}
	if ps.SecurityContext == nil || ps.SecurityContext.RunAsNonRoot == nil || !*ps.SecurityContext.RunAsNonRoot {
		t.Errorf("pod securityContext.runAsNonRoot must be true")
	}
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas < 2 {
		t.Errorf("replicas = %v: the default should be a leader plus a standby", dep.Spec.Replicas)
	}
	tokenSource := map[string]string{}
	for _, v := range ps.Volumes {
		switch {
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				if s.ServiceAccountToken != nil {
					tokenSource[v.Name] = "projected"
				}
			}
		case v.Secret != nil && v.Secret.SecretName == "muster-podgrouper-token":
			tokenSource[v.Name] = "secret"
		}
	}
	for _, tc := range []struct{ name, token, probePort string }{
		{"muster-scheduler", "projected", "10259"},
		{"muster-podgrouper", "secret", "http"},
	} {
		c := container(t, dep, tc.name)
		sc := c.SecurityContext
		switch {
		case sc == nil:
			t.Errorf("%s: no securityContext", c.Name)
			continue
		case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
			t.Errorf("%s: allowPrivilegeEscalation must be false", c.Name)
		case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
			t.Errorf("%s: readOnlyRootFilesystem must be true", c.Name)
		case sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot:
			t.Errorf("%s: runAsNonRoot must be true", c.Name)
		case sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || len(sc.Capabilities.Add) != 0:
			t.Errorf("%s: capabilities must drop ALL and add none", c.Name)
		case sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
			t.Errorf("%s: seccompProfile must be RuntimeDefault", c.Name)
		}
		if c.LivenessProbe == nil || c.ReadinessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet == nil {
			t.Errorf("%s: needs HTTP liveness and readiness probes", c.Name)
		} else if c.LivenessProbe.HTTPGet.Port.String() != tc.probePort {
			t.Errorf("%s: liveness probe on port %s, want %s", c.Name, c.LivenessProbe.HTTPGet.Port.String(), tc.probePort)
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
			t.Errorf("%s: needs cpu/memory requests and a memory limit", c.Name)
		}
		// GOMEMLIMIT makes the collector work harder before the container
		// reaches its limit; at or above the limit it never would, far
		// below it the collector runs all the time.
		if lim, limit := goMemLimit(t, c), c.Resources.Limits.Memory().Value(); lim >= limit || lim < limit*3/4 {
			t.Errorf("%s: GOMEMLIMIT %d bytes, want 75%%-100%% of the memory limit %d", c.Name, lim, limit)
		}
		var tokenVol string
		for _, m := range c.VolumeMounts {
			if m.MountPath == "/var/run/secrets/kubernetes.io/serviceaccount" {
				tokenVol = m.Name
			}
		}
		if got := tokenSource[tokenVol]; got != tc.token {
			t.Errorf("%s: token at the in-cluster path comes from %q (volume %q), want %s", c.Name, got, tokenVol, tc.token)
		}
		if !hasLeaderElection(c.Args) {
			t.Errorf("%s: leader election is not on (args %v)", c.Name, c.Args)
		}
	}
	// The scheduler's liveness is HTTPS on its secure port.
	if p := container(t, dep, "muster-scheduler").LivenessProbe; p != nil && p.HTTPGet != nil && p.HTTPGet.Scheme != corev1.URISchemeHTTPS {
		t.Errorf("scheduler probe scheme %s, want HTTPS", p.HTTPGet.Scheme)
	}
}

// hasLeaderElection: the scheduler elects through its config file
// (leaderElection.leaderElect, checked in TestSchedulerLeaseRole); the
// pod-grouper through a flag.
func hasLeaderElection(args []string) bool {
	for _, a := range args {
		if strings.HasPrefix(a, "--config=") || a == "--leader-elect=true" || a == "--leader-elect" {
			return true
		}
	}
	return false
}

// TestHelmMatchesKustomize: with default values the chart renders the same
// objects as kustomize, except the Namespace (Helm's --create-namespace
// makes it); with namespace.create=true it renders that too. ConfigMap data
// holding YAML is compared as decoded YAML (the chart templates it, so its
// comments and layout differ from the file's).
func TestHelmMatchesKustomize(t *testing.T) {
	k := kustomized(t)
	for _, tc := range []struct {
		name        string
		values      map[string]any
		onlyInKusto []string
	}{
		{"defaults", nil, []string{"/Namespace//muster-system"}},
		{"namespace.create", map[string]any{"namespace": map[string]any{"create": true}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sameObjects(t, k, helmRendered(t, tc.values), tc.onlyInKusto)
		})
	}
}

// sameObjects fails unless the kustomize objects k and the Helm objects h
// are the same objects with the same content, but for the keys onlyInKusto
// (sorted), which only kustomize renders.
func sameObjects(t *testing.T, k, h []*unstructured.Unstructured, onlyInKusto []string) {
	t.Helper()
	hk, err := manifestrender.ByKey(h)
	if err != nil {
		t.Fatal(err)
	}
	kk, err := manifestrender.ByKey(k)
	if err != nil {
		t.Fatal(err)
	}
	var onlyK, onlyH []string
	for key := range kk {
		if _, ok := hk[key]; !ok {
			onlyK = append(onlyK, key)
		}
	}
	for key := range hk {
		if _, ok := kk[key]; !ok {
			onlyH = append(onlyH, key)
		}
	}
	sort.Strings(onlyK)
	if d := cmp.Diff(onlyInKusto, onlyK); d != "" {
		t.Errorf("objects only in kustomize (-want +got):\n%s", d)
	}
	if len(onlyH) > 0 {
		t.Errorf("objects only in the Helm chart: %v", onlyH)
	}
	for key, ko := range kk {
		ho, ok := hk[key]
		if !ok {
			continue
		}
		if d := cmp.Diff(normalize(t, ko), normalize(t, ho)); d != "" {
			t.Errorf("%s differs (-kustomize +helm):\n%s", key, d)
		}
	}
}

// normalize returns the object with YAML-valued ConfigMap data decoded.
func normalize(t *testing.T, o *unstructured.Unstructured) map[string]any {
	t.Helper()
	obj := o.DeepCopy().Object
	if o.GetKind() == "ConfigMap" {
		data, _, _ := unstructured.NestedStringMap(obj, "data")
		decoded := map[string]any{}
		for k, v := range data {
			if strings.HasSuffix(k, ".yaml") {
				var m any
				if err := yaml.Unmarshal([]byte(v), &m); err != nil {
					t.Fatalf("%s data %s: %v", manifestrender.Key(o), k, err)
				}
				decoded[k] = m
				continue
			}
			decoded[k] = v
		}
		obj["data"] = decoded
	}
	return obj
}

// TestHelmValues: the documented values reach the objects, and bad ones
// are refused at render time.
func TestHelmValues(t *testing.T) {
	h := helmRendered(t, map[string]any{
		"image":           map[string]any{"repository": "registry.example/muster", "tag": "v9.9.9", "pullPolicy": "Always"},
		"replicas":        3,
		"schedulerName":   "gang-scheduler",
		"logFormat":       "json",
		"timeouts":        map[string]any{"permitTimeoutSeconds": 120, "partialGangGracePeriodSeconds": 90, "backoffSeconds": 7},
		"schedulerLease":  map[string]any{"namespace": "muster-system", "name": "gang-lease"},
		"schedulerClient": map[string]any{"qps": 500, "burst": 1000},
	})
	dep := convert[appsv1.Deployment](t, find(t, h, "Deployment", manifestrender.Namespace, "muster-scheduler"))
	if *dep.Spec.Replicas != 3 {
		t.Errorf("replicas = %d", *dep.Spec.Replicas)
	}
	for _, c := range dep.Spec.Template.Spec.Containers {
		if c.Image != "registry.example/muster:v9.9.9" || c.ImagePullPolicy != corev1.PullAlways {
			t.Errorf("%s: image %s %s", c.Name, c.Image, c.ImagePullPolicy)
		}
		if !hasArg(c.Args, "--logging-format=json") {
			t.Errorf("%s: args %v lack --logging-format=json", c.Name, c.Args)
		}
	}
	if !hasArg(container(t, dep, "muster-podgrouper").Args, "--scheduler-name=gang-scheduler") {
		t.Errorf("pod-grouper does not group gang-scheduler pods")
	}
	cm := convert[corev1.ConfigMap](t, find(t, h, "ConfigMap", manifestrender.Namespace, "muster-scheduler-config"))
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(cm.Data["scheduler-config.yaml"]), &cfg); err != nil {
		t.Fatal(err)
	}
	prof := cfg["profiles"].([]any)[0].(map[string]any)
	args := prof["pluginConfig"].([]any)[0].(map[string]any)["args"].(map[string]any)
	le := cfg["leaderElection"].(map[string]any)
	cc := cfg["clientConnection"].(map[string]any)
	if prof["schedulerName"] != "gang-scheduler" || args["permitTimeoutSeconds"] != float64(120) ||
		cc["qps"] != float64(500) || cc["burst"] != float64(1000) ||
		args["partialGangGracePeriodSeconds"] != float64(90) || args["backoffSeconds"] != float64(7) ||
		le["resourceName"] != "gang-lease" || le["resourceNamespace"] != "muster-system" {
		t.Errorf("scheduler config does not follow the values: %v", cfg)
	}
	find(t, h, "Role", "muster-system", "muster-scheduler-leader-election")

	if _, err := manifestrender.Helm(chartDir, map[string]any{"logFormat": "xml"}); err == nil || !strings.Contains(err.Error(), "logFormat must be text or json") {
		t.Errorf("logFormat=xml: err = %v, want a refusal naming logFormat", err)
	}
	if _, err := manifestrender.Helm(chartDir, map[string]any{"schedulerClient": map[string]any{"qps": 0, "burst": 10}}); err == nil || !strings.Contains(err.Error(), "schedulerClient.qps") {
		t.Errorf("schedulerClient.qps=0: err = %v, want a refusal naming schedulerClient.qps", err)
	}
}

// TestChartCRDsMatch: the chart ships the same CRDs as manifests/crds.
func TestChartCRDsMatch(t *testing.T) {
	files, _ := filepath.Glob("crds/*.yaml")
	if len(files) == 0 {
		t.Skip("manifests/crds has no CRDs yet")
	}
	for _, f := range files {
		want, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(chartDir, "crds", filepath.Base(f)))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: the chart's copy is missing or differs; copy it to %s/crds/", f, chartDir)
		}
	}
	chartFiles, _ := filepath.Glob(filepath.Join(chartDir, "crds", "*.yaml"))
	if len(chartFiles) != len(files) {
		t.Errorf("chart has %d CRD files, manifests/crds %d", len(chartFiles), len(files))
	}
}

// TestDockerfileBinaries: every binary the image copies out of the build
// stage is one `make build` writes (the image cannot be built here).
func TestDockerfileBinaries(t *testing.T) {
	df, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("make", "-C", "..", "-n", "build", "BIN=/out").CombinedOutput()
	if err != nil {
		t.Fatalf("make -n build: %v\n%s", err, out)
	}
	built := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) > 2 && f[0] == "go" && f[1] == "build":
			for _, a := range f {
				if strings.HasPrefix(a, "./cmd/") {
					built[strings.TrimPrefix(a, "./cmd/")] = true
				}
			}
		case len(f) == 3 && f[0] == "cp" && strings.HasPrefix(f[2], "/out/"):
			built[strings.TrimPrefix(f[2], "/out/")] = true
		}
	}
	if len(built) == 0 {
		t.Fatalf("found no binaries in `make -n build`:\n%s", out)
	}
	if !regexp.MustCompile(`(?m)^FROM golang:1\.26\b.* AS build`).Match(df) ||
		!regexp.MustCompile(`(?m)^FROM gcr\.io/distroless/static[^ ]*:nonroot`).Match(df) ||
		!regexp.MustCompile(`CGO_ENABLED=0`).Match(df) ||
		!regexp.MustCompile(`make build BIN=/out`).Match(df) {
		t.Errorf("Dockerfile: want a golang:1.26 build stage running make build BIN=/out with CGO_ENABLED=0 and a distroless static nonroot base")
	}
	copied := regexp.MustCompile(`(?m)^COPY --from=build /out/(\S+)\s+(\S+)`).FindAllSubmatch(df, -1)
	if len(copied) == 0 {
		t.Fatal("Dockerfile copies no binary from the build stage")
	}
	shipped := map[string]string{}
	for _, m := range copied {
		name := string(m[1])
		if !built[name] {
			t.Errorf("Dockerfile copies /out/%s, which make build does not produce (it builds %v)", name, keys(built))
		}
		shipped[name] = string(m[2])
	}
	// The Deployment's commands must exist in the image.
	dep := convert[appsv1.Deployment](t, find(t, kustomized(t), "Deployment", manifestrender.Namespace, "muster-scheduler"))
	paths := map[string]bool{}
	for _, p := range shipped {
		paths[p] = true
	}
	for _, c := range dep.Spec.Template.Spec.Containers {
		if len(c.Command) == 0 || !paths[c.Command[0]] {
			t.Errorf("container %s runs %v, not a binary the image ships (%v)", c.Name, c.Command, shipped)
		}
	}
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// goMemLimit is the container's GOMEMLIMIT in bytes, in the Go runtime's
// syntax (a number of bytes with an optional B, KiB, MiB, GiB or TiB).
func goMemLimit(t *testing.T, c *corev1.Container) int64 {
	t.Helper()
	for _, e := range c.Env {
		if e.Name != "GOMEMLIMIT" {
			continue
		}
		q, err := resource.ParseQuantity(strings.TrimSuffix(e.Value, "B"))
		if err != nil || !strings.HasSuffix(e.Value, "iB") && strings.ContainsAny(e.Value, "kKMGT") {
			t.Errorf("%s: GOMEMLIMIT=%q is not in the Go runtime's syntax", c.Name, e.Value)
			return 0
		}
		return q.Value()
	}
	t.Errorf("%s: no GOMEMLIMIT", c.Name)
	return 0
}

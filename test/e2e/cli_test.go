package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/cli"
	"github.com/muster-io/muster/localcluster"
)

// The CLI against the shared control plane. No JobSet operator runs here:
// the tests create the JobSet (permissive CRD) and, as its operator would,
// one Job per replicated-job replica with the operator's labels and a
// controller reference; the real Job controller then creates the pods. The
// pod-grouper is not started either: the tests create the PodGroup and
// label the pod templates with it, which is what the pod-grouper writes.
// The gang scheduler (muster's plugin in kube-scheduler) binds the pods.

var jobSetGVR = schema.GroupVersionResource{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"}

func init() {
	registerSetup("JobSet CRD for the CLI tests", func(ctx context.Context, cp *localcluster.ControlPlane) error {
		return cp.InstallCRD(ctx, localcluster.PermissiveCRD("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets", apiextensionsv1.NamespaceScoped, "js"))
	})
}

// jobSet builds a JobSet of one leader and `workers` workers, each pod
// asking for gpus nvidia.com/gpu, placed on pool, scheduled by sched, in
// PodGroup pg.
func jobSet(ns, name, pool, sched, pg string, workers, gpus int) *unstructured.Unstructured {
	sel, tol := localcluster.PoolPlacement(pool)
	tmpl := func() map[string]any {
		return map[string]any{"spec": map[string]any{
			"completionMode": "Indexed", "parallelism": int64(1), "completions": int64(1), "backoffLimit": int64(0),
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{api.LabelPodGroup: pg}},
				"spec": map[string]any{
					"schedulerName": sched, "restartPolicy": "OnFailure",
					"nodeSelector": map[string]any{localcluster.PoolLabel: sel[localcluster.PoolLabel]},
					"tolerations":  []any{map[string]any{"key": tol.Key, "operator": string(tol.Operator), "value": tol.Value, "effect": string(tol.Effect)}},
					"containers": []any{map[string]any{"name": "trainer", "image": "registry.invalid/trainer",
						"resources": map[string]any{
							"requests": map[string]any{"cpu": "1", "memory": "4Gi", "nvidia.com/gpu": fmt.Sprint(gpus)},
							"limits":   map[string]any{"nvidia.com/gpu": fmt.Sprint(gpus)},
						}}},
				},
			},
		}}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{"replicatedJobs": []any{
			map[string]any{"name": "leader", "replicas": int64(1), "template": tmpl()},
			map[string]any{"name": "workers", "replicas": int64(workers), "template": tmpl()},
		}},
	}}
}

// createJobSetWorkload creates the JobSet, its PodGroup (none for pg "")
// and its Jobs the way the JobSet operator names and labels them
// (<js>-<rjob>-<index>).
// managedBy, when set, keeps the Job controller away (the benchmark
// creates the pods itself).
func createJobSetWorkload(t testing.TB, js *unstructured.Unstructured, pg string, minMember int64, managedBy string) *unstructured.Unstructured {
	t.Helper()
	ctx := context.Background()
	ns := js.GetNamespace()
	created, err := controlPlane.Dynamic.Resource(jobSetGVR).Namespace(ns).Create(ctx, js, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owner := metav1.OwnerReference{APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet", Name: created.GetName(), UID: created.GetUID(),
		Controller: ptrTo(true), BlockOwnerDeletion: ptrTo(true)}
	if pg != "" {
		pgObj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
			"metadata": map[string]any{"name": pg, "namespace": ns, "labels": map[string]any{
				api.LabelWorkloadKind: "JobSet", api.LabelWorkloadName: created.GetName(), api.LabelDefinition: "jobset"}},
			"spec": map[string]any{"minMember": minMember},
		}}
		pgObj.SetOwnerReferences([]metav1.OwnerReference{owner})
		if _, err := controlPlane.Dynamic.Resource(schema.GroupVersionResource{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "podgroups"}).
			Namespace(ns).Create(ctx, pgObj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rjobs, _, _ := unstructured.NestedSlice(created.Object, "spec", "replicatedJobs")
	global := 0
	for _, r := range rjobs {
		rj := r.(map[string]any)
		name := rj["name"].(string)
		replicas := rj["replicas"].(int64)
		for j := range replicas {
			labels := map[string]string{
				"jobset.sigs.k8s.io/jobset-name":            created.GetName(),
				"jobset.sigs.k8s.io/jobset-uid":             string(created.GetUID()),
				"jobset.sigs.k8s.io/replicatedjob-name":     name,
				"jobset.sigs.k8s.io/replicatedjob-replicas": fmt.Sprint(replicas),
				"jobset.sigs.k8s.io/job-index":              fmt.Sprint(j),
				"jobset.sigs.k8s.io/job-global-index":       fmt.Sprint(global),
				"jobset.sigs.k8s.io/restart-attempt":        "0",
			}
			global++
			job := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "batch/v1", "kind": "Job"}}
			spec, _, _ := unstructured.NestedMap(rj, "template", "spec")
			job.Object["spec"] = spec
			if managedBy != "" {
				_ = unstructured.SetNestedField(job.Object, managedBy, "spec", "managedBy")
			}
			job.SetName(fmt.Sprintf("%s-%s-%d", created.GetName(), name, j))
			job.SetNamespace(ns)
			job.SetLabels(labels)
			job.SetOwnerReferences([]metav1.OwnerReference{owner})
			podLabels, _, _ := unstructured.NestedStringMap(job.Object, "spec", "template", "metadata", "labels")
			for k, v := range labels {
				podLabels[k] = v
			}
			_ = unstructured.SetNestedStringMap(job.Object, podLabels, "spec", "template", "metadata", "labels")
			if _, err := controlPlane.Dynamic.Resource(schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}).
				Namespace(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return created
}

func ptrTo[T any](v T) *T { return &v }

// muster runs the CLI in-process against the shared control plane.
func muster(t testing.TB, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	env := cli.NewEnv(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	env.Getenv = func(string) string { return "" }
	full := append([]string{"--kubeconfig", controlPlane.KubeconfigPath, "--cache-dir", cacheDir(t)}, args...)
	code = cli.Run(context.Background(), env, full)
	return out.String(), errOut.String(), code
}

func cacheDir(t testing.TB) string {
	t.Helper()
	return t.TempDir()
}

func describeJSON(t testing.TB, ns, ref string) *cli.Description {
	t.Helper()
	out, errOut, code := muster(t, "describe", ref, "-n", ns, "-o", "json")
	if code != 0 {
		t.Fatalf("muster describe %s: exit %d: %s", ref, code, errOut)
	}
	var d cli.Description
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("describe output is not JSON: %v\n%s", err, out)
	}
	return &d
}

// waitPods waits until the namespace has n pods, all of them ok.
func waitPods(t testing.TB, ns string, n int, what string, ok func(*corev1.Pod) bool) {
	t.Helper()
	if _, err := controlPlane.WaitPods(context.Background(), ns, "", n, localcluster.LongTimeout, what, ok); err != nil {
		t.Fatal(err)
	}
}

func podUnschedulable(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message != "" {
			return true
		}
	}
	return false
}

// TestCLIDescribeJobSet: one leader and two workers × 4 GPUs on three
// 4-GPU nodes: 12 GPUs, the leader and workers instances, one gang of 3
// bound, a node for every pod; get lists it.
func TestCLIDescribeJobSet(t *testing.T) {
	ns, sched := gangTest(t, "cli-", 3, 4, nil)
	createJobSetWorkload(t, jobSet(ns, "trainer", ns, sched, "trainer-gang", 2, 4), "trainer-gang", 3, "")
	waitPods(t, ns, 3, "ready", podutil.IsPodReady)

	d := describeJSON(t, ns, "jobset/trainer")
	if d.Totals.GPUs != 12 || d.Totals.Pods != 3 || d.Totals.ReadyPods != 3 || d.Totals.BoundPods != 3 {
		t.Errorf("totals %+v; want 12 GPUs, 3 pods, 3 ready, 3 bound", d.Totals)
	}
	if d.Definition != "jobset" || d.DefinitionOrigin != "embedded" {
		t.Errorf("definition %s (%s); want the embedded jobset", d.Definition, d.DefinitionOrigin)
	}
	// The three roles: the leader instance and the two worker pods.
	got := map[string]int{}
	nodes := map[string]bool{}
	for _, c := range d.Components {
		for _, in := range c.Instances {
			for _, p := range in.Items {
				got[in.ID]++
				if p.Node == "" || p.GPUs != 4 || !p.Ready {
					t.Errorf("pod %s: node %q, %d GPUs, ready %v; want a node, 4 GPUs, ready", p.Name, p.Node, p.GPUs, p.Ready)
				}
				nodes[p.Node] = true
			}
		}
	}
	if got["leader"] != 1 || got["workers"] != 2 {
		t.Errorf("pods per instance %v; want leader 1, workers 2", got)
	}
	if len(nodes) != 3 {
		t.Errorf("pods on nodes %v; want three nodes (4 GPUs each)", nodes)
	}
	if len(d.Gangs) != 1 || d.Gangs[0].Name != "trainer-gang" || d.Gangs[0].MinMember != 3 || d.Gangs[0].Bound != 3 || !d.Gangs[0].PodGroupFound {
		t.Errorf("gangs %+v; want PodGroup trainer-gang, min-member 3, 3 bound", d.Gangs)
	}
	// The plural, not the short name: the operator tests replace this
	// permissive CRD with the real one, which has no short name.
	out, _, code := muster(t, "describe", "jobsets", "trainer", "-n", ns, "--color", "never")
	if code != 0 || !strings.Contains(out, "GPUs:        12") || !strings.Contains(out, "trainer-gang") {
		t.Errorf("table output (exit %d) lacks the totals or the gang:\n%s", code, out)
	}
	t.Logf("muster describe jobsets trainer:\n%s", out)

	out, errOut, code := muster(t, "get", "-n", ns, "-o", "wide", "--color", "never")
	if code != 0 || !strings.Contains(out, "trainer") || !strings.Contains(out, "3/3") || !strings.Contains(out, "1/1") {
		t.Errorf("get (exit %d, %s) does not show trainer with 3/3 pods and 1/1 gangs:\n%s", code, errOut, out)
	}
	t.Logf("muster get -o wide:\n%s", out)
}

// TestCLIDescribePendingGang: workers asking for more GPUs than any node
// has: the gang stays pending and describe says why, in the scheduler's
// words.
func TestCLIDescribePendingGang(t *testing.T) {
	ns, sched := gangTest(t, "cli-pending-", 3, 4, nil)
	createJobSetWorkload(t, jobSet(ns, "big", ns, sched, "big-gang", 2, 8), "big-gang", 3, "")
	waitPods(t, ns, 3, "unschedulable", podUnschedulable)

	d := describeJSON(t, ns, "jobsets/big")
	if len(d.Gangs) != 1 {
		t.Fatalf("gangs %+v; want one", d.Gangs)
	}
	g := d.Gangs[0]
	if g.Bound != 0 || g.Reason == "" {
		t.Errorf("gang %+v; want none bound and the scheduler's reason", g)
	}
	t.Logf("pending gang reason: %s", g.Reason)
	out, errOut, code := muster(t, "describe", "jobset/big", "-n", ns, "--color", "never")
	if code != 0 {
		t.Errorf("muster describe jobset/big: exit %d: %s", code, errOut)
	}
	t.Logf("muster describe jobset/big:\n%s", out)
}

// TestCLIErrorsLive: the exit codes of the live errors.
func TestCLIErrorsLive(t *testing.T) {
	ns := testNamespace(t, "cli-err-")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"describe", "jobsett/x", "-n", ns}, cli.ExitNotFound, `did you mean "jobset"`},
		{[]string{"describe", "jobset/missing", "-n", ns}, cli.ExitNotFound, `"missing" not found`},
		{[]string{"describe", "configmaps/x", "-n", ns}, cli.ExitNoDefinition, "no definition for ConfigMap"},
	} {
		_, errOut, code := muster(t, tc.args...)
		t.Logf("$ muster %s\n%s[exit %d]", strings.Join(tc.args, " "), errOut, code)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("muster %v: exit %d, stderr %q; want %d and %q", tc.args, code, errOut, tc.code, tc.want)
		}
	}
}

// BenchmarkDescribe1000 describes a JobSet of 1000 bound pods (250 Jobs ×
// 4 pods) as JSON: list pods, follow 1000 owner chains (one metadata-only
// list of Jobs), match each pod to its component and gang, render. The pods
// are created directly with a node and the Jobs are marked managed by
// someone else so that the Job controller leaves them alone.
//
//	go test -run '^$' -bench Describe1000 -benchmem -ldflags '...' ./test/e2e
func BenchmarkDescribe1000(b *testing.B) {
	const jobs, perJob = 250, 4
	ctx := context.Background()
	ns := testNamespace(b, "cli-bench-")
	js := jobSet(ns, "big", ns, "default-scheduler", "big-gang", jobs-1, 1)
	// parallelism 4 per Job: 250 Jobs × 4 = 1000 pods.
	rjobs, _, _ := unstructured.NestedSlice(js.Object, "spec", "replicatedJobs")
	for _, r := range rjobs {
		_ = unstructured.SetNestedField(r.(map[string]any), int64(perJob), "template", "spec", "parallelism")
		_ = unstructured.SetNestedField(r.(map[string]any), int64(perJob), "template", "spec", "completions")
	}
	_ = unstructured.SetNestedSlice(js.Object, rjobs, "spec", "replicatedJobs")
	createJobSetWorkload(b, js, "big-gang", jobs*perJob, "muster.io/e2e-stand-in")
	jobList, err := controlPlane.Client.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(jobList.Items) != jobs {
		b.Fatalf("jobs: %v (%d)", err, len(jobList.Items))
	}
	nodeNames := make([]string, 125)
	for i := range nodeNames {
		nodeNames[i] = fmt.Sprintf("%s-%d", ns, i)
	}
	testPool(b, ns, len(nodeNames), func(i int) localcluster.NodeSpec { return localcluster.NodeSpec{Name: nodeNames[i], GPUs: 8} })
	if err := createPods(ctx, ns, jobs*perJob, 16, func(i int) *corev1.Pod {
		job := jobList.Items[i/perJob]
		labels := map[string]string{}
		for k, v := range job.Spec.Template.Labels {
			labels[k] = v
		}
		labels["batch.kubernetes.io/job-completion-index"] = fmt.Sprint(i % perJob)
		spec := *job.Spec.Template.Spec.DeepCopy()
		spec.NodeName = nodeNames[i%len(nodeNames)]
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d-x", job.Name, i%perJob), Labels: labels,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptrTo(true)}}},
			Spec: spec,
		}
	}); err != nil {
		b.Fatal(err)
	}
	waitPods(b, ns, jobs*perJob, "ready", podutil.IsPodReady)

	// Each iteration is one fresh command, as a person runs it: new flags,
	// new clients, the definitions loaded anew; only cli-runtime's disk
	// cache of discovery (--cache-dir) is shared, as between two runs of
	// the binary. The first run fills that cache: it is checked and timed
	// on its own (cold-ms), so the loop measures warm runs only.
	cache := b.TempDir()
	run := func() []byte {
		var out, errOut bytes.Buffer
		env := cli.NewEnv(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
		if code := cli.Run(ctx, env, []string{"--kubeconfig", controlPlane.KubeconfigPath, "--cache-dir", cache,
			"describe", "jobset/big", "-n", ns, "-o", "json"}); code != 0 {
			b.Fatalf("exit %d: %s", code, errOut.String())
		}
		if errOut.Len() > 0 {
			b.Fatalf("describe wrote to stderr: %s", errOut.String())
		}
		return out.Bytes()
	}
	start := time.Now()
	first := run()
	cold := time.Since(start)
	var d cli.Description
	if err := json.Unmarshal(first, &d); err != nil {
		b.Fatalf("describe output is not JSON: %v", err)
	}
	if d.Totals.ObservedPods != jobs*perJob || d.Totals.GPUs != jobs*perJob {
		b.Fatalf("describe saw %d pods and %d GPUs; want %d of each", d.Totals.ObservedPods, d.Totals.GPUs, jobs*perJob)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		run()
	}
	b.ReportMetric(float64(cold.Microseconds())/1000, "cold-ms")
	b.ReportMetric(float64(jobs*perJob), "pods")
}

// TestCLIGetKliFlags: kli's habits against a real API server: TYPE NAME and
// TYPE/NAME, -l on the workloads, --chunk-size paging through continue
// tokens, --phase keeping the workloads with any of the phases given, and a
// type without a definition as an error object in -o json.
func TestCLIGetKliFlags(t *testing.T) {
	ctx := context.Background()
	ns := testNamespace(t, "cli-kli-")
	mk := func(name, team string, replicas int32) {
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"team": team}},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptrTo(replicas),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
					// No scheduler serves this name: the pods stay
					// Pending and the phases stay put.
					Spec: corev1.PodSpec{SchedulerName: "nobody-" + ns, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
				},
			},
		}
		if _, err := controlPlane.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mk("web-a", "nlp", 0)
	mk("web-b", "nlp", 2)
	mk("web-c", "cv", 0)
	for _, n := range []string{"web-a", "web-b", "web-c"} {
		waitFor(t, time.Minute, "Deployment "+n+" observed", objectIs(controlPlane.Client.AppsV1().Deployments(ns), n, func(d *appsv1.Deployment) (bool, string) {
			return d.Status.ObservedGeneration == d.Generation && d.Status.Replicas == *d.Spec.Replicas, fmt.Sprintf("%+v", d.Status)
		}))
	}
	rows := func(args ...string) map[string][]string {
		t.Helper()
		out, errOut, code := muster(t, append([]string{"get", "-n", ns, "-o", "json"}, args...)...)
		if code != 0 {
			t.Fatalf("muster get %v: exit %d: %s", args, code, errOut)
		}
		var l cli.WorkloadList
		if err := json.Unmarshal([]byte(out), &l); err != nil {
			t.Fatal(err)
		}
		m := map[string][]string{}
		for _, r := range l.Items {
			m[r.Name] = r.Phases
		}
		return m
	}
	keys := func(m map[string][]string) string {
		var out []string
		for k := range m {
			out = append(out, k)
		}
		slices.Sort(out)
		return strings.Join(out, ",")
	}
	all := rows("deployments")
	if keys(all) != "web-a,web-b,web-c" {
		t.Fatalf("get deployments: %v", all)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"deployment", "web-b"}, "web-b"},
		{[]string{"deployment/web-b"}, "web-b"},
		{[]string{"deployments", "-l", "team=nlp"}, "web-a,web-b"},
		{[]string{"--all-types", "-l", "team=cv"}, "web-c"},
		{[]string{"deployments", "--chunk-size", "1"}, "web-a,web-b,web-c"},
		{[]string{"deployments", "--chunk-size", "0"}, "web-a,web-b,web-c"},
	} {
		if got := keys(rows(tc.args...)); got != tc.want {
			t.Errorf("muster get %v: %s, want %s", tc.args, got, tc.want)
		}
	}
	for _, ph := range []string{all["web-b"][0], all["web-a"][0]} {
		want := map[string][]string{}
		for n, phs := range all {
			if slices.Contains(phs, ph) {
				want[n] = phs
			}
		}
		if got := keys(rows("deployments", "--phase", ph)); got != keys(want) {
			t.Errorf("--phase %s: %s, want %s (phases %v)", ph, got, keys(want), all)
		}
	}
	if got := keys(rows("deployments", "--phase", all["web-b"][0], "--phase", all["web-a"][0])); got != "web-a,web-b,web-c" {
		t.Errorf("--phase of web-b and of web-a: %s, want all three (phases %v)", got, all)
	}

	out, errOut, code := muster(t, "get", "configmaps", "-n", ns, "-o", "json")
	var rep cli.NoDefinitionReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != cli.ExitNoDefinition || rep.Error != "NoDefinition" || rep.Kind != "ConfigMap" ||
		!strings.Contains(errOut, "no definition for ConfigMap") {
		t.Errorf("get configmaps -o json: exit %d, stdout %q (%v), stderr %q", code, out, err, errOut)
	}
}

// TestCLIDescribeElasticPriorityAndPods: an elastic gang (minMember 2 of 3
// members) whose PodGroup carries the priority annotations the pod-grouper
// writes: describe shows the priority and the quorum and extras in the very
// words of the scheduler's GangElastic event. A bare pod and a pod that
// controls another pod (as a leader pod owns its workers) each describe as
// their own one pod, and get lists each as 1/1.
func TestCLIDescribeElasticPriorityAndPods(t *testing.T) {
	ctx := context.Background()
	ns, sched := gangTest(t, "cli-elastic-", 3, 4, nil)
	createJobSetWorkload(t, jobSet(ns, "elastic", ns, sched, "elastic-gang", 2, 4), "elastic-gang", 2, "")
	pgs := controlPlane.Dynamic.Resource(schema.GroupVersionResource{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "podgroups"}).Namespace(ns)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"1000",%q:"high"}}}`, api.AnnotationPriority, api.AnnotationPriorityClass)
	if _, err := pgs.Patch(ctx, "elastic-gang", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPods(t, ns, 3, "ready", podutil.IsPodReady)

	d := describeJSON(t, ns, "jobset/elastic")
	if len(d.Gangs) != 1 {
		t.Fatalf("gangs %+v; want one", d.Gangs)
	}
	g := d.Gangs[0]
	if g.Priority == nil || *g.Priority != 1000 || g.PriorityClass != "high" {
		t.Errorf("gang priority %v class %q; want 1000 (high)", g.Priority, g.PriorityClass)
	}
	want := cli.ElasticView{Quorum: 2, QuorumBound: 2, Extras: 1, ExtrasBound: 1}
	if g.Elastic == nil || *g.Elastic != want {
		t.Fatalf("gang elastic %+v; want %+v", g.Elastic, want)
	}
	// The scheduler says the same, in the same words.
	waitEvent(t, ns, "PodGroup", "elastic-gang", "GangElastic", []string{ns + "/elastic-gang: " + g.Elastic.String()})
	out, errOut, code := muster(t, "describe", "jobset/elastic", "-n", ns, "--color", "never")
	if code != 0 || !strings.Contains(out, "quorum 2/2 bound, extras 1/1 bound") || !strings.Contains(out, "1000 (high)") {
		t.Errorf("describe table (exit %d, %s) lacks the elastic split or the priority:\n%s", code, errOut, out)
	}
	out, errOut, code = muster(t, "get", "jobsets", "-n", ns, "-o", "wide", "--color", "never")
	if code != 0 || !strings.Contains(out, "PRIORITY") || !strings.Contains(out, " 1000 ") {
		t.Errorf("get -o wide (exit %d, %s) lacks the priority:\n%s", code, errOut, out)
	}

	// One member described alone: its gang is all three members.
	members, err := controlPlane.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: api.LabelPodGroup + "=elastic-gang"})
	if err != nil || len(members.Items) != 3 {
		t.Fatalf("members of elastic-gang: %v (%v); want 3", members, err)
	}
	m := describeJSON(t, ns, "pod/"+members.Items[0].Name)
	if m.Totals.ObservedPods != 1 || len(m.Gangs) != 1 || m.Gangs[0].Name != "elastic-gang" || m.Gangs[0].Pods != 3 || m.Gangs[0].Bound != 3 || m.Gangs[0].Reason != "" {
		t.Errorf("describe pod/%s: totals %+v, gangs %+v; want 1 pod, gang elastic-gang of 3, all bound", members.Items[0].Name, m.Totals, m.Gangs)
	}

	// Pods bound by name (no scheduler involved) on the pool's nodes.
	_, tol := localcluster.PoolPlacement(ns)
	pod := func(name, node string, owner *corev1.Pod) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.PodSpec{NodeName: node, Tolerations: []corev1.Toleration{tol},
				Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/app"}}},
		}
		if owner != nil {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: owner.Name, UID: owner.UID, Controller: ptrTo(true)}}
		}
		created, err := controlPlane.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return created
	}
	pod("bare", ns+"-0", nil)
	leader := pod("leader", ns+"-1", nil)
	pod("leader-1", ns+"-2", leader)
	waitPods(t, ns, 6, "ready", podutil.IsPodReady)
	for _, name := range []string{"bare", "leader"} {
		d := describeJSON(t, ns, "pod/"+name)
		var names []string
		for _, c := range d.Components {
			for _, in := range c.Instances {
				for _, p := range in.Items {
					names = append(names, p.Name)
				}
			}
		}
		if strings.Join(names, ",") != name || d.Totals.ObservedPods != 1 || d.Totals.ReadyPods != 1 || d.Totals.BoundPods != 1 {
			t.Errorf("describe pod/%s: pods %v, totals %+v; want only %s, found, ready and bound", name, names, d.Totals, name)
		}
		out, _, _ := muster(t, "describe", "pod/"+name, "-n", ns, "--color", "never")
		if !strings.Contains(out, "1 pod, ready, on node ") {
			t.Errorf("describe pod/%s: no plain Pods line:\n%s", name, out)
		}
	}
	out, errOut, code = muster(t, "get", "pods", "-n", ns, "-o", "json")
	var l cli.WorkloadList
	if code != 0 {
		t.Fatalf("get pods: exit %d: %s", code, errOut)
	}
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range l.Items {
		got[r.Name] = fmt.Sprintf("%d/%d", r.ReadyPods, r.Pods)
	}
	if len(got) != 2 || got["bare"] != "1/1" || got["leader"] != "1/1" {
		t.Errorf("get pods: %v; want bare 1/1 and leader 1/1 (leader-1 belongs to the leader)", got)
	}
}

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/cli"
	"github.com/muster-io/muster/localcluster"
)

// `muster fit` against what muster-scheduler then does, on the shared
// control plane: each test has its own namespace, node pool, muster
// scheduler (the shipped profile) and pod-grouper. The workloads are
// Indexed Jobs made one gang by muster.io/min-member (the Job controller
// runs here; no operator is needed). fit is asked first, then the Job is
// submitted and the scheduler's outcome compared with fit's answer: the
// verdict, the reason in the same words, and the nodes (the plan is
// deterministic on one snapshot, so the members per node must match).

// fitSetup gives a fit test its namespace (also its pool's name), a muster
// scheduler and a pod-grouper for it, and the pool's nodes.
func fitSetup(t *testing.T, prefix string, n int, spec func(i int) localcluster.NodeSpec) (ns, sched string) {
	t.Helper()
	ns = testNamespace(t, prefix)
	sched = "muster-" + ns
	startGangScheduler(t, sched, nil)
	startPodGrouper(t, sched)
	testPool(t, ns, n, spec)
	return ns, sched
}

// fitJob is an Indexed Job of members pods with gpus GPUs each (as a
// limit, the way GPU jobs are written), one gang by muster.io/min-member,
// placed on the pool named ns.
func fitJob(ns, name, sched string, members, gpus int, annotations map[string]string) []byte {
	sel, tol := localcluster.PoolPlacement(ns)
	ann := map[string]string{api.AnnotationMinMember: strconv.Itoa(members)}
	for k, v := range annotations {
		ann[k] = v
	}
	n := int32(members)
	job := &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: ann},
		Spec: batchv1.JobSpec{
			CompletionMode: ptrTo(batchv1.IndexedCompletion), Parallelism: &n, Completions: &n, BackoffLimit: ptrTo[int32](0),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				SchedulerName: sched, RestartPolicy: corev1.RestartPolicyNever,
				NodeSelector: sel, Tolerations: []corev1.Toleration{tol},
				Containers: []corev1.Container{{Name: "trainer", Image: "registry.invalid/trainer", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
					Limits:   corev1.ResourceList{localcluster.DefaultGPUResource: *resource.NewQuantity(int64(gpus), resource.DecimalSI)},
				}}},
			}},
		},
	}
	data, err := json.Marshal(job)
	if err != nil {
		panic(err) // a Job always encodes
	}
	return data
}

// fitFile writes a manifest for `muster fit -f`.
func fitFile(t *testing.T, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "workload.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// runFit runs `muster fit ARGS -o json` and decodes the report.
func runFit(t *testing.T, args ...string) *cli.FitReport {
	t.Helper()
	out, errOut, code := muster(t, append(append([]string{"fit"}, args...), "-o", "json")...)
	if code != 0 {
		t.Fatalf("muster fit %s: exit %d: %s", strings.Join(args, " "), code, errOut)
	}
	var r cli.FitReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("muster fit -o json: %v\n%s", err, out)
	}
	return &r
}

// fitOnlyGang is the one gang of the one workload fit evaluated.
func fitOnlyGang(t *testing.T, r *cli.FitReport) cli.GangFit {
	t.Helper()
	if len(r.Clusters) != 1 || len(r.Clusters[0].Workloads) != 1 || len(r.Clusters[0].Workloads[0].Gangs) != 1 {
		t.Fatalf("fit report %+v; want one cluster, one workload, one gang", r)
	}
	return r.Clusters[0].Workloads[0].Gangs[0]
}

// fitGangNodes counts a gang's members per node.
type fitGangNodes map[string]int

// String is "node=count,…" sorted, comparable as a whole.
func (g fitGangNodes) String() string {
	var parts []string
	for n, c := range g {
		parts = append(parts, fmt.Sprintf("%s=%d", n, c))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// fitNodes counts fit's assignments per node.
func fitNodes(g cli.GangFit) fitGangNodes {
	out := fitGangNodes{}
	for _, a := range g.Assignments {
		out[a.Node]++
	}
	return out
}

// schedOutcome is what the scheduler did with a gang: every member bound
// (and where), or its GangUnschedulable reason.
type schedOutcome struct {
	bound  bool
	nodes  fitGangNodes
	reason string
}

// waitOutcome waits until the Job's members pods are all bound, or the
// scheduler has recorded GangUnschedulable on its PodGroup; with none bound
// then (a gang binds whole or not at all).
func waitOutcome(t *testing.T, ns, job string, members int) schedOutcome {
	t.Helper()
	var out schedOutcome
	waitFor(t, gangTimeout, fmt.Sprintf("gang %s/%s bound or refused", ns, job), func(ctx context.Context) (bool, string, error) {
		pods, err := controlPlane.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + job})
		if err != nil {
			return false, "", err
		}
		nodes := fitGangNodes{}
		bound := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				bound++
				nodes[p.Spec.NodeName]++
			}
		}
		if bound == members && len(pods.Items) == members {
			out = schedOutcome{bound: true, nodes: nodes}
			return true, "", nil
		}
		evs, err := controlPlane.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		for _, e := range evs.Items {
			if e.Reason == "GangUnschedulable" && e.Regarding.Kind == "PodGroup" && e.Regarding.Name == job {
				if bound > 0 {
					return false, "", fmt.Errorf("gang %s refused (%s) with %d of %d members bound", job, e.Note, bound, members)
				}
				out = schedOutcome{reason: e.Note}
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("%d pods, %d bound, no GangUnschedulable event", len(pods.Items), bound), nil
	})
	return out
}

// submitAndCompare submits the Job fit was asked about and checks that the
// scheduler agrees with fit's verdict, nodes and reason.
func submitAndCompare(t *testing.T, ns, job string, members int, data []byte, g cli.GangFit) schedOutcome {
	t.Helper()
	applyYAML(t, ns, string(data))
	got := waitOutcome(t, ns, job, members)
	switch {
	case got.bound != g.Fits:
		t.Errorf("gang %s: fit says %q (%s), the scheduler %s", job, g.Verdict, g.Reason, describeOutcome(got))
	case got.bound && got.nodes.String() != fitNodes(g).String():
		t.Errorf("gang %s: fit placed %s, the scheduler bound %s", job, fitNodes(g), got.nodes)
	case !got.bound && got.reason != g.Reason:
		t.Errorf("gang %s: fit's reason\n  %s\nthe scheduler's\n  %s", job, g.Reason, got.reason)
	}
	return got
}

func describeOutcome(o schedOutcome) string {
	if o.bound {
		return "bound it on " + o.nodes.String()
	}
	return "refused it: " + o.reason
}

// TestFitGangFits: a gang of 3 × 4 GPUs on three 8-GPU nodes, one of them
// half used: fit says where, the scheduler binds it there.
func TestFitGangFits(t *testing.T) {
	ns, sched := fitSetup(t, "fit-", 3, func(int) localcluster.NodeSpec { return localcluster.NodeSpec{GPUs: 8} })
	// Half of node 1 taken by a pod bound without a scheduler.
	fitFiller(t, ns, ns+"-1", 4)
	data := fitJob(ns, "train", sched, 3, 4, nil)
	g := fitOnlyGang(t, runFit(t, "-f", fitFile(t, data)))
	if !g.Fits || g.Name != "train" || g.MinMember != 3 || len(g.Assignments) != 3 {
		t.Fatalf("fit: %+v; want gang train (min-member 3) fits, 3 members placed", g)
	}
	for _, n := range g.Nodes {
		if n.GPUs != 8 || n.GPUsFree-n.GPUsFreeAfter != int64(4*len(n.Members)) {
			t.Errorf("node %+v: want 8 GPUs and 4 fewer free per member", n)
		}
	}
	submitAndCompare(t, ns, "train", 3, data, g)

	// The submitted workload, live: every member bound, nothing to place.
	r := runFit(t, "job/train", "-n", ns)
	if lg := fitOnlyGang(t, r); lg.Bound != 3 || !lg.Fits || len(lg.Assignments) != 0 || r.Clusters[0].Workloads[0].Source != "live" {
		t.Errorf("fit job/train after binding: %+v (source %s); want live, 3 bound, nothing to place", lg, r.Clusters[0].Workloads[0].Source)
	}
}

// fitFiller binds a pod holding gpus GPUs to node directly (as another
// team's running workload), and waits until the scheduler's informer could
// have seen it: Running, set by the pod simulator after the bind.
func fitFiller(t *testing.T, ns, node string, gpus int) {
	t.Helper()
	sel, tol := localcluster.PoolPlacement(ns)
	q := corev1.ResourceList{localcluster.DefaultGPUResource: *resource.NewQuantity(int64(gpus), resource.DecimalSI)}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "filler-" + node, Namespace: ns, Labels: map[string]string{"fit-filler": "true"}},
		Spec: corev1.PodSpec{NodeName: node, NodeSelector: sel, Tolerations: []corev1.Toleration{tol},
			Containers: []corev1.Container{{Name: "busy", Image: "registry.invalid/busy", Resources: corev1.ResourceRequirements{Requests: q, Limits: q}}}},
	}
	if _, err := controlPlane.Client.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, localcluster.ShortTimeout, "filler "+p.Name+" running", objectIs(controlPlane.Client.CoreV1().Pods(ns), p.Name, func(p *corev1.Pod) (bool, string) {
		return p.Status.Phase == corev1.PodRunning, string(p.Status.Phase)
	}))
}

const zoneKey = "topology.kubernetes.io/zone"

// TestFitTopologyRequired: 4 × 4 GPUs in one zone: zone-a (two 4-GPU
// nodes) is too small, zone-b (two 8-GPU nodes) fits. fit names zone-b, the
// scheduler binds every member there.
func TestFitTopologyRequired(t *testing.T) {
	ns, sched := fitSetup(t, "fit-zone-", 4, func(i int) localcluster.NodeSpec {
		if i < 2 {
			return localcluster.NodeSpec{GPUs: 4, Labels: map[string]string{zoneKey: "zone-a"}}
		}
		return localcluster.NodeSpec{GPUs: 8, Labels: map[string]string{zoneKey: "zone-b"}}
	})
	data := fitJob(ns, "zonal", sched, 4, 4, map[string]string{api.AnnotationTopologyRequired: zoneKey})
	g := fitOnlyGang(t, runFit(t, "-f", fitFile(t, data)))
	if !g.Fits || g.Topology == nil || !g.Topology.Required || g.Topology.Domain != "zone-b" {
		t.Fatalf("fit: %+v (topology %+v); want fits in zone-b (required)", g, g.Topology)
	}
	for _, n := range g.Nodes {
		if n.Domain != "zone-b" {
			t.Errorf("fit placed members on %s in %s", n.Name, n.Domain)
		}
	}
	submitAndCompare(t, ns, "zonal", 4, data, g)

	// One more such gang fits nowhere now, and says so in the scheduler's
	// words.
	data = fitJob(ns, "zonal-2", sched, 4, 4, map[string]string{api.AnnotationTopologyRequired: zoneKey})
	g = fitOnlyGang(t, runFit(t, "-f", fitFile(t, data)))
	if g.Fits || !strings.Contains(g.Reason, "in one "+zoneKey+" domain") {
		t.Fatalf("fit: %+v; want does not fit, in one zone", g)
	}
	submitAndCompare(t, ns, "zonal-2", 4, data, g)
}

// TestFitDoesNotFit: 3 × 8 GPUs on two 8-GPU nodes: fit gives the reason
// the scheduler then records on the PodGroup, word for word.
func TestFitDoesNotFit(t *testing.T) {
	ns, sched := fitSetup(t, "fit-no-", 2, func(int) localcluster.NodeSpec { return localcluster.NodeSpec{GPUs: 8} })
	data := fitJob(ns, "big", sched, 3, 8, nil)
	g := fitOnlyGang(t, runFit(t, "-f", fitFile(t, data)))
	want := fmt.Sprintf("gang %s/big: needs 24 nvidia.com/gpu for 3 members (8 per member); best placement fits 2 of 3 members (free nvidia.com/gpu per node: 8,8", ns)
	if g.Fits || g.Verdict != "does not fit" || !strings.HasPrefix(g.Reason, want) {
		t.Fatalf("fit: %+v; want does not fit, reason starting %q", g, want)
	}
	submitAndCompare(t, ns, "big", 3, data, g)
}

// TestFitRandomGangs: on a pool fragmented by pods of random sizes, fit
// and the scheduler agree on 20 random gangs in a row: most gangs that fit
// stay (fragmenting the pool further), the others are deleted again.
func TestFitRandomGangs(t *testing.T) {
	const nodes, gpus, gangs = 6, 8, 20
	seed := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv("MUSTER_FIT_SEED"), 10, 64); err == nil {
		seed = v
	}
	t.Logf("seed %d (replay with MUSTER_FIT_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	ns, sched := fitSetup(t, "fit-rand-", nodes, func(int) localcluster.NodeSpec { return localcluster.NodeSpec{GPUs: gpus} })
	for i := range nodes {
		if used := rng.IntN(gpus); used > 0 {
			fitFiller(t, ns, fmt.Sprintf("%s-%d", ns, i), used)
		}
	}
	sizes := []int{1, 2, 4, 8}
	fits := 0
	for i := range gangs {
		name := fmt.Sprintf("g%02d", i)
		members, per := 1+rng.IntN(4), sizes[rng.IntN(len(sizes))]
		data := fitJob(ns, name, sched, members, per, nil)
		g := fitOnlyGang(t, runFit(t, "-f", fitFile(t, data)))
		got := submitAndCompare(t, ns, name, members, data, g)
		// A third of the gangs that fit leave again, so the pool does not
		// only fill up: capacity comes back in odd places.
		keep := got.bound && rng.IntN(3) > 0
		t.Logf("%s: %d × %d GPUs: fit %s %s; scheduler %s; kept %v", name, members, per, g.Verdict, fitNodes(g), describeOutcome(got), keep)
		if got.bound {
			fits++
		}
		if keep {
			continue
		}
		// Gone before the next gang, so that it meets the pool fit sees.
		if err := controlPlane.Client.BatchV1().Jobs(ns).Delete(context.Background(), name, metav1.DeleteOptions{PropagationPolicy: ptrTo(metav1.DeletePropagationBackground)}); err != nil {
			t.Fatal(err)
		}
		waitGone(t, ns, batchv1.JobNameLabel+"="+name)
	}
	t.Logf("%d of %d gangs fit", fits, gangs)
}

// TestFitRanksTwoClusters: two control planes as two contexts of one
// kubeconfig, plus one that is down. The shared one fits the gang but
// leaves three nodes with GPUs partly used; a second control plane
// (localcluster.Start, only nodes) fits it leaving none: it ranks first.
func TestFitRanksTwoClusters(t *testing.T) {
	ns, sched := fitSetup(t, "fit-rank-", 3, func(int) localcluster.NodeSpec { return localcluster.NodeSpec{GPUs: 8} })
	for i := range 3 {
		fitFiller(t, ns, fmt.Sprintf("%s-%d", ns, i), 2)
	}
	second, err := localcluster.Start(localcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(second.Stop)
	// The same pool name, so the workload's node selector and toleration
	// fit both clusters.
	if _, err := second.CreateNodes(context.Background(), 2, func(i int) localcluster.NodeSpec {
		return localcluster.NodeSpec{Name: fmt.Sprintf("second-%d", i), GPUs: 4, Pool: ns}
	}); err != nil {
		t.Fatal(err)
	}
	kubeconfig := mergedKubeconfig(t, map[string]string{"shared": controlPlane.KubeconfigPath, "second": second.KubeconfigPath})
	data := fitJob(ns, "pair", sched, 2, 4, nil)
	r := runFit(t, "-f", fitFile(t, data), "--kubeconfig", kubeconfig, "--context", "down", "--context", "shared", "--context", "second")
	var order []string
	for _, c := range r.Clusters {
		order = append(order, c.Context)
	}
	if strings.Join(order, ",") != "second,shared,down" {
		t.Errorf("ranking %v; want second, shared, down", order)
	}
	byName := map[string]cli.ClusterFit{}
	for _, c := range r.Clusters {
		byName[c.Context] = c
	}
	if c := byName["second"]; !c.Fits || c.PartialGPUNodesAfter != 0 || c.Nodes != 2 {
		t.Errorf("second: %+v; want fits, 2 nodes, no partly used GPU node after", c)
	}
	if c := byName["shared"]; !c.Fits || c.PartialGPUNodesAfter < 3 {
		t.Errorf("shared: %+v; want fits, at least the pool's 3 nodes partly used after", c)
	}
	if c := byName["down"]; c.Error == "" || !strings.Contains(c.Error, "unreachable") {
		t.Errorf("down: %+v; want an unreachable error", c)
	}
	// The scheduler of the shared cluster agrees with its part of the answer.
	for _, w := range byName["shared"].Workloads {
		submitAndCompare(t, ns, "pair", 2, data, w.Gangs[0])
	}
}

// mergedKubeconfig writes one kubeconfig with a context per control plane
// (named by the map) and a context "down" whose server refuses connections.
func mergedKubeconfig(t *testing.T, planes map[string]string) string {
	t.Helper()
	out := clientcmdapi.NewConfig()
	for name, path := range planes {
		kc, err := clientcmd.LoadFromFile(path)
		if err != nil {
			t.Fatal(err)
		}
		ctx := kc.Contexts[kc.CurrentContext]
		out.Clusters[name] = kc.Clusters[ctx.Cluster]
		out.AuthInfos[name] = kc.AuthInfos[ctx.AuthInfo]
		out.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	}
	port, err := localcluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	out.Clusters["down"] = &clientcmdapi.Cluster{Server: fmt.Sprintf("https://127.0.0.1:%d", port), InsecureSkipTLSVerify: true}
	out.AuthInfos["down"] = &clientcmdapi.AuthInfo{Token: "none"}
	out.Contexts["down"] = &clientcmdapi.Context{Cluster: "down", AuthInfo: "down"}
	out.CurrentContext = "shared"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*out, path); err != nil {
		t.Fatal(err)
	}
	return path
}

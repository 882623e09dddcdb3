package victims

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/plugins/gang/plan"
)

// vpod is a bound pod for the victim tests: gpus GPUs, a priority, a gang
// label (muster) or none, started age ago.
type vpod struct {
	name, node, gang string
	gpus             int64
	prio             int32
	age              time.Duration
	labels           map[string]string
	annotations      map[string]string
}

// gpuNames are the resources the tests count as GPUs.
var gpuNames = []v1.ResourceName{"nvidia.com/gpu", "amd.com/gpu"}

var testNow = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func (s vpod) pod() *v1.Pod {
	req := v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), "nvidia.com/gpu": *resource.NewQuantity(s.gpus, resource.DecimalSI)}
	labels := map[string]string{}
	for k, v := range s.labels {
		labels[k] = v
	}
	if s.gang != "" {
		labels[api.LabelPodGroup] = s.gang
	}
	start := metav1.NewTime(testNow.Add(-s.age))
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: s.name, UID: types.UID("uid-" + s.name), Labels: labels, Annotations: s.annotations, CreationTimestamp: start},
		Spec: v1.PodSpec{
			NodeName:   s.node,
			Priority:   ptr.To(s.prio),
			Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: req, Limits: req}}},
		},
		Status: v1.PodStatus{Phase: v1.PodRunning, StartTime: &start},
	}
}

// gangOfPods makes n bound members of gang g, spread over nodes in turn.
func gangOfPods(g string, n int, gpus int64, prio int32, age time.Duration, nodes ...string) []vpod {
	var out []vpod
	for i := range n {
		out = append(out, vpod{name: fmt.Sprintf("%s-%d", g, i), node: nodes[i%len(nodes)], gang: g, gpus: gpus, prio: prio, age: age})
	}
	return out
}

func victimNodes(gpusPerNode int64, names []string, pods []vpod) []fwk.NodeInfo {
	byNode := map[string][]*v1.Pod{}
	for _, s := range pods {
		byNode[s.node] = append(byNode[s.node], s.pod())
	}
	var out []fwk.NodeInfo
	for _, name := range names {
		alloc := v1.ResourceList{
			v1.ResourceCPU: resource.MustParse("64"), v1.ResourceMemory: resource.MustParse("256Gi"), v1.ResourcePods: resource.MustParse("110"),
			"nvidia.com/gpu": *resource.NewQuantity(gpusPerNode, resource.DecimalSI),
		}
		ni := framework.NewNodeInfo(byNode[name]...)
		ni.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: v1.NodeStatus{Allocatable: alloc, Capacity: alloc}})
		out = append(out, ni)
	}
	return out
}

// preemptorPods are the pending members of the preemptor gang.
func preemptorPods(n int, gpus int64) []*v1.Pod {
	var out []*v1.Pod
	for i := range n {
		out = append(out, vpod{name: fmt.Sprintf("hi-%d", i), gang: "hi", gpus: gpus, prio: 100}.pod())
	}
	for _, p := range out {
		p.Spec.NodeName = ""
	}
	return out
}

type victimCase struct {
	name        string
	gpusPerNode int64
	nodes       []string
	running     []vpod
	minMember   map[string]int
	recorded    map[string]int32 // PodGroup priority annotations
	pdbs        []*policy.PodDisruptionBudget
	// the preemptor: n members of gpus GPUs at priority prio.
	n    int
	gpus int64
	prio int32
	// want: the chosen units' keys, in any order; or wantErr in the error.
	want    []string
	wantErr string
}

func runVictimCase(t testing.TB, tc victimCase) (*Result, error) {
	nodes := victimNodes(tc.gpusPerNode, tc.nodes, tc.running)
	pending := preemptorPods(tc.n, tc.gpus)
	in := Input{
		Nodes:    nodes,
		Priority: tc.prio,
		Own:      func(p *v1.Pod) bool { return p.Labels[api.LabelPodGroup] == "hi" },
		MinMember: func(k types.NamespacedName) int {
			return tc.minMember[k.Name]
		},
		GangPriority: func(k types.NamespacedName) (int32, bool) {
			v, ok := tc.recorded[k.Name]
			return v, ok
		},
		PDBs:     tc.pdbs,
		GPUNames: gpuNames,
	}
	units := Build(in)
	req := plan.Request{Gang: "ns/hi", MinMember: tc.n, Pending: pending}
	return Search(context.Background(), units, func(ctx context.Context, removed map[types.UID]bool) (*plan.Plan, error) {
		r := req
		r.Nodes = RemoveFromNodes(klog.Background(), nodes, removed)
		return plan.Compute(ctx, r)
	}, NewShortfall(pending, nodes))
}

func unitKeys(units []*Unit) []string {
	var out []string
	for _, u := range units {
		out = append(out, u.Key)
	}
	sort.Strings(out)
	return out
}

func pdb(name string, selector map[string]string, allowed int32) *policy.PodDisruptionBudget {
	return &policy.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec:       policy.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: selector}, MinAvailable: ptr.To(intstr.FromInt32(1))},
		Status:     policy.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed},
	}
}

func withLabel(pods []vpod, k, v string) []vpod {
	for i := range pods {
		pods[i].labels = map[string]string{k: v}
	}
	return pods
}

func TestSearchVictims(t *testing.T) {
	two := []string{"n1", "n2"}
	cases := []victimCase{
		{
			name: "lowest priority gang first", gpusPerNode: 8, nodes: two,
			running: slices.Concat(gangOfPods("a", 8, 1, 5, time.Hour, "n1"), gangOfPods("b", 8, 1, 1, time.Hour, "n2")),
			n:       8, gpus: 1, prio: 100,
			want: []string{"gang ns/b"},
		},
		{
			name: "no gang broken when lone pods make room", gpusPerNode: 8, nodes: []string{"n1"},
			running: slices.Concat(gangOfPods("a", 4, 1, 1, time.Hour, "n1"),
				[]vpod{{name: "p0", node: "n1", gpus: 1, prio: 5}, {name: "p1", node: "n1", gpus: 1, prio: 5}, {name: "p2", node: "n1", gpus: 1, prio: 5}, {name: "p3", node: "n1", gpus: 1, prio: 5}}),
			n: 4, gpus: 1, prio: 100,
			want: []string{"pod ns/p0", "pod ns/p1", "pod ns/p2", "pod ns/p3"},
		},
		{
			name: "fewer pods at equal priority", gpusPerNode: 4, nodes: two,
			running: slices.Concat(gangOfPods("a", 4, 1, 1, time.Hour, "n1"), gangOfPods("b", 2, 2, 1, time.Hour, "n2")),
			n:       1, gpus: 4, prio: 100,
			want: []string{"gang ns/b"},
		},
		{
			name: "youngest at equal cost", gpusPerNode: 4, nodes: two,
			running: slices.Concat(gangOfPods("old", 4, 1, 1, 2*time.Hour, "n1"), gangOfPods("young", 4, 1, 1, time.Minute, "n2")),
			n:       4, gpus: 1, prio: 100,
			want: []string{"gang ns/young"},
		},
		{
			name: "a gang spread over nodes goes whole", gpusPerNode: 4, nodes: two,
			running: gangOfPods("a", 8, 1, 1, time.Hour, "n1", "n2"),
			n:       1, gpus: 4, prio: 100,
			want: []string{"gang ns/a"},
		},
		{
			name: "PDB-protected gang spared when another will do", gpusPerNode: 8, nodes: two,
			running: slices.Concat(withLabel(gangOfPods("a", 8, 1, 1, time.Hour, "n1"), "app", "a"), gangOfPods("b", 8, 1, 50, time.Hour, "n2")),
			pdbs:    []*policy.PodDisruptionBudget{pdb("a", map[string]string{"app": "a"}, 0)},
			n:       8, gpus: 1, prio: 100,
			want: []string{"gang ns/b"},
		},
		{
			name: "PDB-protected gang taken when nothing else fits", gpusPerNode: 8, nodes: two,
			running: slices.Concat(withLabel(gangOfPods("a", 8, 1, 1, time.Hour, "n1"), "app", "a"), gangOfPods("b", 8, 1, 50, time.Hour, "n2")),
			pdbs:    []*policy.PodDisruptionBudget{pdb("a", map[string]string{"app": "a"}, 0)},
			n:       16, gpus: 1, prio: 100,
			want: []string{"gang ns/a", "gang ns/b"},
		},
		{
			name: "a gang with one member at the preemptor's priority is no victim", gpusPerNode: 8, nodes: two,
			running: slices.Concat(
				append(gangOfPods("a", 7, 1, 1, time.Hour, "n1"), vpod{name: "a-hi", node: "n1", gang: "a", gpus: 1, prio: 100}),
				gangOfPods("b", 8, 1, 50, time.Hour, "n2")),
			n: 8, gpus: 1, prio: 100,
			want: []string{"gang ns/b"},
		},
		{
			name: "a gang whose recorded priority is the preemptor's is no victim", gpusPerNode: 8, nodes: two,
			running:  slices.Concat(gangOfPods("a", 8, 1, 1, time.Hour, "n1"), gangOfPods("b", 8, 1, 50, time.Hour, "n2")),
			recorded: map[string]int32{"a": 100},
			n:        8, gpus: 1, prio: 100,
			want: []string{"gang ns/b"},
		},
		{
			name: "equal priority: nothing to preempt", gpusPerNode: 8, nodes: two,
			running: slices.Concat(gangOfPods("a", 8, 1, 100, time.Hour, "n1"), gangOfPods("b", 8, 1, 100, time.Hour, "n2")),
			n:       8, gpus: 1, prio: 100,
			wantErr: "no running pod has a lower priority",
		},
		{
			name: "would not fit even after evicting everything", gpusPerNode: 8, nodes: two,
			running: slices.Concat(gangOfPods("a", 8, 1, 1, time.Hour, "n1"), gangOfPods("b", 8, 1, 1, time.Hour, "n2")),
			n:       3, gpus: 8, prio: 100,
			wantErr: "would not fit even after evicting all 16 lower-priority pods",
		},
	}
	checkVictimCases(t, cases)
}

// Extras of elastic gangs and other mechanisms' gangs are units too.
func TestSearchVictimsExtrasAndForeign(t *testing.T) {
	two := []string{"n1", "n2"}
	cases := []victimCase{
		{
			name: "elastic extras go first, before any whole gang", gpusPerNode: 4, nodes: two,
			running: slices.Concat(gangOfPods("e", 3, 1, 5, time.Hour, "n1"), gangOfPods("b", 4, 1, 1, time.Hour, "n2")),
			// e runs 3 with a quorum of 2: one extra; n1 has 1 free GPU.
			minMember: map[string]int{"e": 2, "b": 4},
			n:         2, gpus: 1, prio: 100,
			want: []string{"extra ns/e-0 of gang ns/e"},
		},
		{
			name: "extras given back when a whole gang must go anyway", gpusPerNode: 4, nodes: two,
			running:   slices.Concat(gangOfPods("e", 4, 1, 5, time.Hour, "n1"), gangOfPods("b", 4, 1, 1, time.Hour, "n2")),
			minMember: map[string]int{"e": 2, "b": 4},
			n:         4, gpus: 1, prio: 100,
			// The two extras free 2 GPUs, not 4: a gang must go, and
			// with b gone the extras are not needed.
			want: []string{"gang ns/b"},
		},
		{
			name: "extras and lone pods together before a gang", gpusPerNode: 4, nodes: two,
			running: slices.Concat(gangOfPods("e", 3, 1, 5, time.Hour, "n1"), []vpod{{name: "p", node: "n1", gpus: 1, prio: 9}},
				gangOfPods("b", 4, 1, 1, time.Hour, "n2")),
			minMember: map[string]int{"e": 2, "b": 4},
			n:         2, gpus: 1, prio: 100,
			want: []string{"extra ns/e-0 of gang ns/e", "pod ns/p"},
		},
		{
			name: "a foreign gang goes whole", gpusPerNode: 4, nodes: two,
			running: []vpod{
				{name: "v0", node: "n1", gpus: 2, prio: 1, annotations: map[string]string{api.AnnotationVolcanoGroup: "vg"}},
				{name: "v1", node: "n2", gpus: 2, prio: 1, annotations: map[string]string{api.AnnotationVolcanoGroup: "vg"}},
				{name: "x", node: "n2", gpus: 2, prio: 1},
			},
			n: 1, gpus: 4, prio: 100,
			want: []string{"Volcano gang ns/vg"},
		},
	}
	checkVictimCases(t, cases)
}

// checkVictimCases runs each case's search and compares the victims (or
// the error) with the case's.
func checkVictimCases(t *testing.T, cases []victimCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := runVictimCase(t, tc)
			if tc.wantErr != "" {
				var wnf *WouldNotFitError
				if !errors.As(err, &wnf) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want a WouldNotFitError containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := append([]string(nil), tc.want...)
			sort.Strings(want)
			if got := unitKeys(res.Units); !slices.Equal(got, want) {
				t.Errorf("victims %v, want %v", got, want)
			}
			if len(res.Plan.Assignments) < tc.n {
				t.Errorf("plan places %d members, want %d", len(res.Plan.Assignments), tc.n)
			}
		})
	}
}

func TestCheaperOrder(t *testing.T) {
	at := func(d time.Duration) time.Time { return testNow.Add(-d) }
	units := []*Unit{
		{Key: "pdb", ViolatesPDB: true, Priority: 0},
		{Key: "gang-hi", BreaksGang: true, Priority: 9, Started: at(time.Hour)},
		{Key: "gang-big", BreaksGang: true, Priority: 1, Pods: make([]fwk.PodInfo, 8), Started: at(time.Hour)},
		{Key: "gang-gpu", BreaksGang: true, Priority: 1, Pods: make([]fwk.PodInfo, 2), GPUs: 16, Started: at(time.Hour)},
		{Key: "gang-old", BreaksGang: true, Priority: 1, Pods: make([]fwk.PodInfo, 2), GPUs: 2, Started: at(2 * time.Hour)},
		{Key: "gang-young", BreaksGang: true, Priority: 1, Pods: make([]fwk.PodInfo, 2), GPUs: 2, Started: at(time.Minute)},
		{Key: "pod", Priority: 50},
		{Key: "extra", Extra: true, Priority: 60},
	}
	want := []string{"extra", "pod", "gang-young", "gang-old", "gang-gpu", "gang-big", "gang-hi", "pdb"}
	for range 5 {
		shuffled := append([]*Unit(nil), units...)
		slices.Reverse(shuffled)
		sort.SliceStable(shuffled, func(i, j int) bool { return Cheaper(shuffled[i], shuffled[j]) })
		var got []string
		for _, u := range shuffled {
			got = append(got, u.Key)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("order %v, want %v", got, want)
		}
	}
}

// TestSearchVictimsAgainstExhaustive compares the search with the cheapest
// set found by trying every subset, on small random clusters: the search
// must always find a set when one exists, the set must be minimal, and the
// log says how often it is the cheapest and how many pods more it takes.
func TestSearchVictimsAgainstExhaustive(t *testing.T) {
	rnd := rand.New(rand.NewPCG(15, 1))
	nodes := []string{"n0", "n1", "n2", "n3"}
	var cases, optimal, extraPods, found int
	for trial := range 120 {
		free := map[string]int64{"n0": 8, "n1": 8, "n2": 8, "n3": 8}
		var running []vpod
		for g := 0; len(running) < 24; g++ {
			size := 1 + rnd.IntN(4)
			gpus := int64(1 + rnd.IntN(2))
			prio := int32(1 + rnd.IntN(3))
			name := ""
			if size > 1 {
				name = fmt.Sprintf("g%d", g)
			}
			var members []vpod
			for m := range size {
				node := nodes[rnd.IntN(len(nodes))]
				if free[node] < gpus {
					continue
				}
				free[node] -= gpus
				members = append(members, vpod{name: fmt.Sprintf("t%d-g%d-%d", trial, g, m), node: node, gang: name, gpus: gpus, prio: prio, age: time.Duration(rnd.IntN(100)) * time.Minute})
			}
			running = append(running, members...)
			if g > 40 {
				break
			}
		}
		tc := victimCase{gpusPerNode: 8, nodes: nodes, running: running, n: 1 + rnd.IntN(3), gpus: int64(2 + rnd.IntN(5)), prio: 100}
		nodeInfos := victimNodes(tc.gpusPerNode, tc.nodes, tc.running)
		pending := preemptorPods(tc.n, tc.gpus)
		units := Build(Input{Nodes: nodeInfos, Priority: tc.prio, GPUNames: gpuNames})
		if len(units) > 12 {
			continue
		}
		req := plan.Request{Gang: "ns/hi", MinMember: tc.n, Pending: pending}
		fit := func(ctx context.Context, removed map[types.UID]bool) (*plan.Plan, error) {
			r := req
			r.Nodes = RemoveFromNodes(klog.Background(), nodeInfos, removed)
			return plan.Compute(ctx, r)
		}
		setFits := func(set []*Unit) bool {
			removed := map[types.UID]bool{}
			for _, u := range set {
				for _, pi := range u.Pods {
					removed[pi.GetPod().UID] = true
				}
			}
			_, err := fit(context.Background(), removed)
			return err == nil
		}
		var best []*Unit
		bestFound := false
		for mask := 0; mask < 1<<len(units); mask++ {
			var set []*Unit
			for i, u := range units {
				if mask&(1<<i) != 0 {
					set = append(set, u)
				}
			}
			if (!bestFound || costLess(costOf(set), costOf(best))) && setFits(set) {
				best, bestFound = set, true
			}
		}
		res, err := Search(context.Background(), units, fit, NewShortfall(pending, nodeInfos))
		if !bestFound {
			if err == nil {
				t.Fatalf("trial %d: search found %v where no subset fits", trial, unitKeys(res.Units))
			}
			continue
		}
		cases++
		if err != nil {
			t.Fatalf("trial %d: search failed (%v) where %v fits", trial, err, unitKeys(best))
		}
		if len(best) > 0 {
			found++
		}
		for i := range res.Units {
			rest := append(append([]*Unit(nil), res.Units[:i]...), res.Units[i+1:]...)
			if setFits(rest) {
				t.Errorf("trial %d: victim set %v is not minimal: fits without %s", trial, unitKeys(res.Units), res.Units[i].Key)
			}
		}
		got, want := costOf(res.Units), costOf(best)
		if got == want {
			optimal++
		}
		extraPods += int(got[3] - want[3])
	}
	if cases < 40 {
		t.Fatalf("only %d usable trials", cases)
	}
	t.Logf("%d trials (%d needing victims): the search's set was the cheapest by the documented order in %d (%.0f%%); %d pods evicted beyond the cheapest sets in all", cases, found, optimal, 100*float64(optimal)/float64(cases), extraPods)
}

// Build's pass that looks for a lower-priority pod counts the same pods
// Build groups: not the preemptor's own, not those being deleted.
func TestBuildWithoutLowerPriorityPods(t *testing.T) {
	deleting := func(p *v1.Pod) { p.DeletionTimestamp = ptr.To(metav1.NewTime(testNow)) }
	tests := []struct {
		name   string
		low    vpod
		change func(*v1.Pod)
		want   []string
	}{
		{"a lower-priority pod is a victim", vpod{name: "low", node: "n1", gpus: 1, prio: 1}, nil, []string{"pod ns/low"}},
		{"only the preemptor's own pod is lower", vpod{name: "own", node: "n1", gang: "hi", gpus: 1, prio: 1}, nil, nil},
		{"only a deleting pod is lower", vpod{name: "gone", node: "n1", gpus: 1, prio: 1}, deleting, nil},
		{"equal priority", vpod{name: "eq", node: "n1", gpus: 1, prio: 5}, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nodes := victimNodes(8, []string{"n1", "n2"}, []vpod{{name: "high", node: "n2", gpus: 1, prio: 9}, tc.low})
			if tc.change != nil {
				for _, ni := range nodes {
					for _, pi := range ni.GetPods() {
						if pi.GetPod().Name == tc.low.name {
							tc.change(pi.GetPod())
						}
					}
				}
			}
			units := Build(Input{Nodes: nodes, Priority: 5, GPUNames: gpuNames,
				Own: func(p *v1.Pod) bool { return p.Labels[api.LabelPodGroup] == "hi" }})
			if got := unitKeys(units); !slices.Equal(got, tc.want) {
				t.Errorf("units %q, want %q", got, tc.want)
			}
		})
	}
}

// blockerFilter stands in for a filter that sees the whole cluster (a
// running pod's anti-affinity against the preemptor): it refuses every
// node while pod uid-lo-0 is in its view, whatever the node holds.
type blockerFilter struct{ gone map[types.UID]bool }

func (f blockerFilter) Check(context.Context, *plan.Shape, fwk.NodeInfo) bool {
	return f.gone["uid-lo-0"]
}

func (f blockerFilter) Session(ctx context.Context) plan.Session {
	return plan.FilterFunc(f.Check).Session(ctx)
}

func (f blockerFilter) Without(removed []plan.PodOnNode) plan.Filter {
	g := blockerFilter{gone: map[types.UID]bool{}}
	for uid := range f.gone {
		g.gone[uid] = true
	}
	for _, r := range removed {
		g.gone[r.Pod.GetPod().UID] = true
	}
	return g
}

// TestFindTellsTheFilterWhatIsGone: the victims Find tries are gone from
// the filters' view too, not only from their nodes.
func TestFindTellsTheFilterWhatIsGone(t *testing.T) {
	nodes := victimNodes(8, []string{"n1"}, gangOfPods("lo", 1, 8, 1, time.Hour, "n1"))
	req := plan.Request{Gang: "ns/hi", MinMember: 1, Pending: preemptorPods(1, 8), Nodes: nodes, Filter: blockerFilter{}}
	in := Input{
		Priority:  100,
		Own:       func(p *v1.Pod) bool { return p.Labels[api.LabelPodGroup] == "hi" },
		MinMember: func(types.NamespacedName) int { return 1 },
		GPUNames:  gpuNames,
	}
	res, _, err := Find(context.Background(), req, in)
	if err != nil {
		t.Fatal(err)
	}
	if got := unitKeys(res.Units); len(got) != 1 || got[0] != "gang ns/lo" {
		t.Errorf("victims %v, want the gang ns/lo", got)
	}
}

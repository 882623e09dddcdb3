package plan

import (
	"context"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

const gpu = v1.ResourceName("nvidia.com/gpu")

// nodeInfo builds a snapshot node with cpu, memory, pods and GPUs, running
// the given pods.
func nodeInfo(name string, gpus int64, labels map[string]string, taints []v1.Taint, running ...*v1.Pod) fwk.NodeInfo {
	alloc := v1.ResourceList{
		v1.ResourceCPU:    resource.MustParse("64"),
		v1.ResourceMemory: resource.MustParse("256Gi"),
		v1.ResourcePods:   resource.MustParse("110"),
	}
	if gpus > 0 {
		alloc[gpu] = *resource.NewQuantity(gpus, resource.DecimalSI)
	}
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       v1.NodeSpec{Taints: taints},
		Status:     v1.NodeStatus{Allocatable: alloc, Capacity: alloc},
	}
	ni := framework.NewNodeInfo(running...)
	ni.SetNode(n)
	return ni
}

// pod builds a member requesting gpus GPUs and 1 CPU.
func pod(name string, gpus int64) *v1.Pod {
	req := v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}
	if gpus > 0 {
		req[gpu] = *resource.NewQuantity(gpus, resource.DecimalSI)
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
		Spec: v1.PodSpec{Containers: []v1.Container{{
			Name: "c", Resources: v1.ResourceRequirements{Requests: req, Limits: req},
		}}},
	}
}

func pods(prefix string, n int, gpus int64) []*v1.Pod {
	var out []*v1.Pod
	for i := range n {
		out = append(out, pod(fmt.Sprintf("%s-%d", prefix, i), gpus))
	}
	return out
}

func onNode(p *v1.Pod, node string) *v1.Pod {
	p = p.DeepCopy()
	p.Spec.NodeName = node
	return p
}

// taintFilter stands in for the TaintToleration plugin: a node with a
// NoSchedule taint is refused unless the pod tolerates it.
var taintFilter = FilterFunc(func(_ context.Context, s *Shape, ni fwk.NodeInfo) bool {
	for _, t := range ni.Node().Spec.Taints {
		ok := false
		for _, tol := range s.Pod.Spec.Tolerations {
			ok = ok || tol.ToleratesTaint(klogless(), &t, false)
		}
		if !ok {
			return false
		}
	}
	return true
})

// perNode counts assignments per node, as "node=count" sorted.
func perNode(a map[types.UID]string) string {
	c := map[string]int{}
	for _, n := range a {
		c[n]++
	}
	var parts []string
	for n, k := range c {
		parts = append(parts, fmt.Sprintf("%s=%d", n, k))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// computeCase is one Compute request and what it must give.
type computeCase struct {
	name      string
	req       Request
	want      string // perNode of the assignments
	wantErr   string // substring of the message
	wantRelax bool
	wantDom   string
}

func TestCompute(t *testing.T) {
	tainted := []v1.Taint{{Key: "dedicated", Value: "x", Effect: v1.TaintEffectNoSchedule}}
	runCompute(t, []computeCase{
		{
			name: "12 one-GPU members fill three 4-GPU nodes",
			req: Request{MinMember: 12, Pending: pods("p", 12, 1), Nodes: []fwk.NodeInfo{
				nodeInfo("n1", 4, nil, nil), nodeInfo("n2", 4, nil, nil), nodeInfo("n3", 4, nil, nil),
			}},
			want: "n1=4,n2=4,n3=4",
		},
		{
			name: "capacity for 11 of 12: nothing placed, the reason names GPUs",
			req: Request{Gang: "ns/pg", MinMember: 12, Pending: pods("p", 12, 1), Nodes: []fwk.NodeInfo{
				nodeInfo("n1", 4, nil, nil), nodeInfo("n2", 4, nil, nil), nodeInfo("n3", 3, nil, nil),
			}},
			wantErr: "gang ns/pg: needs 12 nvidia.com/gpu for 12 members (1 per member); best placement fits 11 of 12 members (free nvidia.com/gpu per node: 4,4,3)",
		},
		{
			name: "fragmentation: 8-GPU members on 4-GPU nodes are refused up front",
			req: Request{Gang: "ns/big", MinMember: 2, Pending: pods("p", 2, 8), Nodes: []fwk.NodeInfo{
				nodeInfo("n1", 4, nil, nil), nodeInfo("n2", 4, nil, nil), nodeInfo("n3", 4, nil, nil), nodeInfo("n4", 4, nil, nil),
			}},
			wantErr: "gang ns/big: needs 16 nvidia.com/gpu for 2 members (8 per member); best placement fits 0 of 2 members (free nvidia.com/gpu per node: 4,4,4,4); no node has room for one member",
		},
		{
			name: "best fit fills the partly used node first",
			req: Request{MinMember: 3, Pending: pods("p", 3, 2), Nodes: []fwk.NodeInfo{
				nodeInfo("a", 8, nil, nil), nodeInfo("b", 8, nil, nil, onNode(pod("x", 6), "b")),
			}},
			want: "a=2,b=1",
		},
		{
			name: "members already placed count toward the quorum and use their node",
			req: Request{MinMember: 4, Placed: []string{"n1", "n1"}, Pending: pods("p", 2, 2), Nodes: []fwk.NodeInfo{
				nodeInfo("n1", 4, nil, nil, onNode(pod("b0", 2), "n1"), onNode(pod("b1", 2), "n1")), nodeInfo("n2", 4, nil, nil),
			}},
			want: "n2=2",
		},
		{
			name: "quorum met without every pending member",
			req: Request{MinMember: 2, Pending: pods("p", 3, 4), Nodes: []fwk.NodeInfo{
				nodeInfo("n1", 4, nil, nil), nodeInfo("n2", 4, nil, nil),
			}},
			want: "n1=1,n2=1",
		},
		{
			name: "other filters: a tainted node is not used",
			req: Request{Gang: "ns/t", MinMember: 2, Filter: taintFilter, Pending: pods("p", 2, 4), Nodes: []fwk.NodeInfo{
				nodeInfo("n1", 4, nil, nil), nodeInfo("n2", 4, nil, tainted),
			}},
			wantErr: "best placement fits 1 of 2 members (free nvidia.com/gpu per node: 4,4); 1 of 2 nodes rejected by other filters",
		},
		{
			name: "held capacity of another gang's plan is not offered",
			req: Request{MinMember: 2, Pending: pods("p", 2, 4), Held: map[string][]fwk.PodInfo{"n1": {podInfo(pod("other", 4))}}, Nodes: []fwk.NodeInfo{
				nodeInfo("n1", 4, nil, nil), nodeInfo("n2", 4, nil, nil), nodeInfo("n3", 4, nil, nil),
			}},
			want: "n2=1,n3=1",
		},
	})
}

func TestComputeTopology(t *testing.T) {
	zone := func(z string) map[string]string { return map[string]string{"zone": z} }
	runCompute(t, []computeCase{
		{
			name: "topology required: all members in one zone, the largest first",
			req: Request{MinMember: 4, Topology: Topology{Key: "zone", Required: true}, Pending: pods("p", 4, 2), Nodes: []fwk.NodeInfo{
				nodeInfo("a1", 4, zone("a"), nil), nodeInfo("b1", 4, zone("b"), nil), nodeInfo("b2", 4, zone("b"), nil), nodeInfo("c1", 8, zone("c"), nil),
			}},
			want:    "b1=2,b2=2",
			wantDom: "b",
		},
		{
			name: "topology required: no single zone fits",
			req: Request{Gang: "ns/z", MinMember: 4, Topology: Topology{Key: "zone", Required: true}, Pending: pods("p", 4, 2), Nodes: []fwk.NodeInfo{
				nodeInfo("a1", 4, zone("a"), nil), nodeInfo("b1", 4, zone("b"), nil),
			}},
			wantErr: "gang ns/z: needs 8 nvidia.com/gpu for 4 members (2 per member) in one zone domain; best domain a; best placement fits 2 of 4 members",
		},
		{
			name: "topology preferred: relaxed across zones when none fits alone",
			req: Request{MinMember: 4, Topology: Topology{Key: "zone"}, Pending: pods("p", 4, 2), Nodes: []fwk.NodeInfo{
				nodeInfo("a1", 4, zone("a"), nil), nodeInfo("b1", 4, zone("b"), nil),
			}},
			want:      "a1=2,b1=2",
			wantRelax: true,
		},
		{
			name: "topology preferred: one zone when it fits",
			req: Request{MinMember: 2, Topology: Topology{Key: "zone"}, Pending: pods("p", 2, 2), Nodes: []fwk.NodeInfo{
				nodeInfo("a1", 2, zone("a"), nil), nodeInfo("b1", 2, zone("b"), nil), nodeInfo("b2", 2, zone("b"), nil),
			}},
			want:    "b1=1,b2=1",
			wantDom: "b",
		},
		{
			name: "topology required with a bound member pins its zone",
			req: Request{MinMember: 2, Topology: Topology{Key: "zone", Required: true}, Placed: []string{"a1"}, Pending: pods("p", 1, 2), Nodes: []fwk.NodeInfo{
				nodeInfo("a1", 4, zone("a"), nil, onNode(pod("b0", 2), "a1")), nodeInfo("b1", 8, zone("b"), nil),
			}},
			want:    "a1=1",
			wantDom: "a",
		},
		{
			name: "topology required without labelled nodes",
			req: Request{Gang: "ns/z", MinMember: 1, Topology: Topology{Key: "rack", Required: true}, Pending: pods("p", 1, 1), Nodes: []fwk.NodeInfo{
				nodeInfo("a1", 4, nil, nil),
			}},
			wantErr: "no node carries the label rack",
		},
	})
}

func runCompute(t *testing.T, tests []computeCase) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Compute(context.Background(), tc.req)
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("want error containing %q, got plan %v", tc.wantErr, perNode(got.Assignments))
				}
				if !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %q does not contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if diff := cmp.Diff(tc.want, perNode(got.Assignments)); diff != "" {
				t.Errorf("assignments (-want, +got):\n%s", diff)
			}
			if got.Relaxed != tc.wantRelax || got.Domain != tc.wantDom {
				t.Errorf("domain %q relaxed %v, want %q %v", got.Domain, got.Relaxed, tc.wantDom, tc.wantRelax)
			}
		})
	}
}

func podInfo(p *v1.Pod) fwk.PodInfo {
	pi, _ := framework.NewPodInfo(p)
	return pi
}

func TestGroupShapes(t *testing.T) {
	a, b := pod("a", 1), pod("b", 1)
	b.Labels = map[string]string{"index": "1"} // labels do not split shapes
	c := pod("c", 2)
	d := pod("d", 1)
	d.Spec.NodeSelector = map[string]string{"pool": "x"}
	shapes := GroupShapes([]*v1.Pod{a, b, c, d})
	var got []string
	for _, s := range shapes {
		var names []string
		for _, m := range s.Members {
			names = append(names, m.Name)
		}
		got = append(got, strings.Join(names, "+"))
	}
	sort.Strings(got)
	if diff := cmp.Diff([]string{"a+b", "c", "d"}, got); diff != "" {
		t.Errorf("shapes (-want, +got):\n%s", diff)
	}
}

// countingFilter counts Check calls, to prove filters run per shape and node.
type countingFilter struct{ calls map[string]int }

func (f *countingFilter) Check(_ context.Context, s *Shape, ni fwk.NodeInfo) bool {
	f.calls[s.Pod.Name+"@"+ni.Node().Name]++
	return true
}

func (f *countingFilter) Session(ctx context.Context) Session {
	return FilterFunc(f.Check).Session(ctx)
}

func TestFiltersRunOncePerShapeAndNode(t *testing.T) {
	f := &countingFilter{calls: map[string]int{}}
	members := append(pods("small", 6, 1), pods("big", 2, 4)...)
	_, err := Compute(context.Background(), Request{MinMember: 8, Filter: f, Pending: members, Nodes: []fwk.NodeInfo{
		nodeInfo("n1", 8, nil, nil), nodeInfo("n2", 8, nil, nil), nodeInfo("n3", 8, nil, nil),
	}})
	if err != nil {
		t.Fatal(err)
	}
	// The big shape packs first and fills n1; the small one is never asked
	// about a node with no room left.
	if len(f.calls) != 5 || f.calls["small-0@n1"] != 0 {
		t.Errorf("want 5 distinct checks (not small-0@n1), got %d: %v", len(f.calls), f.calls)
	}
	for k, n := range f.calls {
		if n != 1 {
			t.Errorf("%s checked %d times", k, n)
		}
	}
}

func TestFiltersAskedOnlyAsFarAsPackingReaches(t *testing.T) {
	var nodes []fwk.NodeInfo
	for i := range 1000 {
		var taints []v1.Taint
		if i < 40 {
			taints = []v1.Taint{{Key: "busy", Effect: v1.TaintEffectNoSchedule}}
		}
		nodes = append(nodes, nodeInfo(fmt.Sprintf("n%04d", i), 8, nil, taints))
	}
	asked := 0
	f := FilterFunc(func(ctx context.Context, s *Shape, ni fwk.NodeInfo) bool {
		asked++
		return taintFilter(ctx, s, ni)
	})
	got, err := Compute(context.Background(), Request{MinMember: 8, Filter: f, Pending: pods("p", 8, 1), Nodes: nodes})
	if err != nil {
		t.Fatal(err)
	}
	// Best fit by name among equal nodes: the first untainted one.
	if diff := cmp.Diff("n0040=8", perNode(got.Assignments)); diff != "" {
		t.Errorf("(-want, +got):\n%s", diff)
	}
	// 40 refusals and the node that fits, in batches of lazyBatch: not
	// the 1000 nodes an eager evaluation asks about.
	if asked > 40+lazyBatch {
		t.Errorf("filters asked about %d nodes, want at most %d", asked, 40+lazyBatch)
	}

	// A refusal still counts every node the filters reject.
	asked = 0
	_, err = Compute(context.Background(), Request{Gang: "ns/big", MinMember: 8, Filter: f, Pending: pods("p", 8, 9), Nodes: nodes})
	if err == nil {
		t.Fatal("want no placement for 9-GPU members on 8-GPU nodes")
	}
	_, err = Compute(context.Background(), Request{Gang: "ns/all", MinMember: 8000, Filter: f, Pending: pods("p", 8000, 1), Nodes: nodes})
	if err == nil || !strings.Contains(err.Error(), "40 of 1000 nodes rejected by other filters") {
		t.Errorf("want the refusal to count the 40 tainted nodes, got %v", err)
	}
}

// TestLazyFiltersPlaceAsEagerOnes compares, on random clusters, plans whose
// filters are asked lazily with plans of the same request whose filters are
// asked about every node first (a required topology over one domain makes
// the planner rank domains by filtered capacity, which asks them all).
func TestLazyFiltersPlaceAsEagerOnes(t *testing.T) {
	rnd := rand.New(rand.NewSource(18))
	for trial := range 200 {
		var nodes []fwk.NodeInfo
		for i := range 5 + rnd.Intn(60) {
			var taints []v1.Taint
			if rnd.Intn(3) == 0 {
				taints = []v1.Taint{{Key: "busy", Effect: v1.TaintEffectNoSchedule}}
			}
			gpus := int64(rnd.Intn(9))
			var running []*v1.Pod
			if used := rnd.Int63n(gpus + 1); used > 0 {
				running = append(running, onNode(pod(fmt.Sprintf("r%d", i), used), fmt.Sprintf("n%03d", i)))
			}
			nodes = append(nodes, nodeInfo(fmt.Sprintf("n%03d", i), gpus, map[string]string{"all": "one"}, taints, running...))
		}
		members := append(pods("a", 1+rnd.Intn(12), 1), pods("b", rnd.Intn(4), int64(1+rnd.Intn(4)))...)
		req := Request{Gang: "ns/g", MinMember: len(members), Filter: taintFilter, Pending: members, Nodes: nodes, Parallelize: goParallel}
		lazy, lazyErr := Compute(context.Background(), req)
		req.Topology = Topology{Key: "all", Required: true}
		eager, eagerErr := Compute(context.Background(), req)
		if (lazyErr == nil) != (eagerErr == nil) {
			t.Fatalf("trial %d: lazy error %v, eager error %v", trial, lazyErr, eagerErr)
		}
		if lazyErr != nil {
			continue
		}
		if diff := cmp.Diff(eager.Assignments, lazy.Assignments); diff != "" {
			t.Fatalf("trial %d: lazy plan differs from eager (-eager, +lazy):\n%s", trial, diff)
		}
	}
}

// goParallel runs every piece on its own goroutine, as the scheduler's
// parallelizer may (go test -race checks the planner's shared state).
func goParallel(_ context.Context, pieces int, fn func(int)) {
	var wg sync.WaitGroup
	for i := range pieces {
		wg.Go(func() { fn(i) })
	}
	wg.Wait()
}

// BenchmarkPlan is the cost of one whole-gang plan: a 64-member gang of
// 1-GPU pods on empty 8-GPU nodes, with and without a required zone.
func BenchmarkPlan(b *testing.B) {
	members := pods("p", 64, 1)
	for _, n := range []int{1000, 5000} {
		var nodes []fwk.NodeInfo
		for i := range n {
			nodes = append(nodes, nodeInfo(fmt.Sprintf("n%04d", i), 8, map[string]string{"zone": fmt.Sprintf("z%d", i%10)}, nil))
		}
		cases := []struct {
			name string
			req  Request
		}{
			{fmt.Sprintf("%dx8GPU/64members", n), Request{MinMember: 64, Pending: members, Nodes: nodes, Filter: taintFilter}},
			{fmt.Sprintf("%dx8GPU/64members/zone-required", n), Request{MinMember: 64, Pending: members, Nodes: nodes, Filter: taintFilter, Topology: Topology{Key: "zone", Required: true}}},
		}
		for _, tc := range cases {
			b.Run(tc.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := Compute(context.Background(), tc.req); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

package plan

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// antiAffinityFilter refuses a node that holds a pod labelled app=x, as a
// required pod anti-affinity on the hostname against app=x would: members
// interfere only through the node they share, which FilterFunc's sessions
// show them.
var antiAffinityFilter = FilterFunc(func(_ context.Context, _ *Shape, ni fwk.NodeInfo) bool {
	for _, pi := range ni.GetPods() {
		if pi.GetPod().Labels["app"] == "x" {
			return false
		}
	}
	return true
})

// withAntiAffinity gives members the label and the required anti-affinity
// that make their shape interfering.
func withAntiAffinity(members []*v1.Pod) []*v1.Pod {
	for _, m := range members {
		m.Labels = map[string]string{"app": "x"}
		m.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
			TopologyKey: "kubernetes.io/hostname", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}},
		}}}}
	}
	return members
}

func TestInterferingMembersAreJudgedWithThoseBefore(t *testing.T) {
	members := withAntiAffinity(pods("p", 3, 1))
	nodes := []fwk.NodeInfo{nodeInfo("n1", 8, nil, nil), nodeInfo("n2", 8, nil, nil)}
	_, err := Compute(context.Background(), Request{Gang: "ns/aa", MinMember: 3, Filter: antiAffinityFilter, Pending: members, Nodes: nodes})
	want := "gang ns/aa: needs room for 3 members; best placement fits 2 of 3 members; with 2 members placed, the filters refuse the next on every node with room"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("want a refusal starting %q, got %v", want, err)
	}
	nodes = append(nodes, nodeInfo("n3", 8, nil, nil))
	got, err := Compute(context.Background(), Request{MinMember: 3, Filter: antiAffinityFilter, Pending: members, Nodes: nodes})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("n1=1,n2=1,n3=1", perNode(got.Assignments)); diff != "" {
		t.Errorf("(-want, +got):\n%s", diff)
	}
	if !got.Ordered || len(got.Order) != 3 || got.Order[0] != members[0].UID || len(got.Shape) != 3 {
		t.Errorf("a plan of interfering members must be Ordered with the members in the order placed; got ordered %v, order %v, shapes %v", got.Ordered, got.Order, got.Shape)
	}
	// The snapshot given to the planner is never changed.
	for _, ni := range nodes {
		if n := len(ni.GetPods()); n != 0 {
			t.Errorf("snapshot node %s has %d pods after planning, want 0", ni.Node().Name, n)
		}
	}
}

// spreadFilter stands in for PodTopologySpread with maxSkew 1 over the
// "zone" label, DoNotSchedule: its sessions count members per zone across
// nodes, which no single node shows.
type spreadFilter struct{ zones []string }

func (f *spreadFilter) Check(context.Context, *Shape, fwk.NodeInfo) bool { return true }

func (f *spreadFilter) Session(context.Context) Session {
	return &spreadSession{zones: f.zones, count: map[string]int{}}
}

type spreadSession struct {
	zones []string
	mu    sync.Mutex
	count map[string]int
}

func (s *spreadSession) Fits(_ context.Context, _ *Shape, ni fwk.NodeInfo) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	lowest := -1
	for _, z := range s.zones {
		if c := s.count[z]; lowest < 0 || c < lowest {
			lowest = c
		}
	}
	return s.count[ni.Node().Labels["zone"]]+1-lowest <= 1
}

func (s *spreadSession) Place(_ context.Context, _ *Shape, _ fwk.PodInfo, ni fwk.NodeInfo) {
	s.count[ni.Node().Labels["zone"]]++
}

// TestSpreadAcrossNodesIsPlanned: six members under a zone spread on two
// zones of two nodes each. Judging each node alone (the snapshot has no
// member anywhere) allows one member per node, four in all; judging each
// member with those before it places three per zone, as the scheduler's
// own filters would one member at a time.
func TestSpreadAcrossNodesIsPlanned(t *testing.T) {
	members := pods("p", 6, 1)
	for _, m := range members {
		m.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: v1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}},
		}}
	}
	var nodes []fwk.NodeInfo
	for _, n := range []struct{ name, zone string }{{"a1", "a"}, {"a2", "a"}, {"b1", "b"}, {"b2", "b"}} {
		nodes = append(nodes, nodeInfo(n.name, 2, map[string]string{"zone": n.zone}, nil))
	}
	got, err := Compute(context.Background(), Request{Gang: "ns/s", MinMember: 6, Filter: &spreadFilter{zones: []string{"a", "b"}},
		Pending: members, Nodes: nodes, Parallelize: goParallel})
	if err != nil {
		t.Fatal(err)
	}
	zone := map[string]int{}
	for _, n := range got.Assignments {
		zone[n[:1]]++
	}
	if diff := cmp.Diff(map[string]int{"a": 3, "b": 3}, zone); diff != "" {
		t.Errorf("members per zone (-want, +got):\n%s", diff)
	}
	// In the order given, each member keeps the skew at most 1 with those
	// before it: the plan holds when they are reserved in that order.
	seen := map[string]int{}
	for _, m := range members {
		z := got.Assignments[m.UID][:1]
		seen[z]++
		if d := seen["a"] - seen["b"]; d > 1 || d < -1 {
			t.Fatalf("after %s the skew is %d: %v", m.Name, d, seen)
		}
	}
}

func TestInterferingGangWithoutFilterChecksResourcesOnly(t *testing.T) {
	members := withAntiAffinity(pods("p", 3, 1))
	got, err := Compute(context.Background(), Request{MinMember: 3, Pending: members, Nodes: []fwk.NodeInfo{nodeInfo("n1", 8, nil, nil)}})
	if err != nil {
		t.Fatal(err)
	}
	if got.Ordered || perNode(got.Assignments) != "n1=3" {
		t.Errorf("want all three on n1, not ordered; got %s, ordered %v", perNode(got.Assignments), got.Ordered)
	}
}

package planfilter

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/muster-io/muster/manifests"
	"github.com/muster-io/muster/plugins/gang/plan"
)

const gpu = v1.ResourceName("nvidia.com/gpu")

func node(name, zone string, gpus int64, taints ...v1.Taint) *v1.Node {
	alloc := v1.ResourceList{
		v1.ResourceCPU: resource.MustParse("16"), v1.ResourceMemory: resource.MustParse("64Gi"),
		v1.ResourcePods: resource.MustParse("110"), gpu: *resource.NewQuantity(gpus, resource.DecimalSI),
	}
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone,
		}},
		Spec:   v1.NodeSpec{Taints: taints},
		Status: v1.NodeStatus{Allocatable: alloc, Capacity: alloc},
	}
}

func member(i int, mutate func(*v1.Pod)) *v1.Pod {
	req := v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), gpu: resource.MustParse("1")}
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: fmt.Sprintf("m-%d", i), UID: types.UID(fmt.Sprintf("uid-m-%d", i)),
			Labels: map[string]string{"app": "train"}},
		Spec: v1.PodSpec{SchedulerName: "muster-scheduler", Containers: []v1.Container{{
			Name: "c", Image: "x", Resources: v1.ResourceRequirements{Requests: req, Limits: req},
		}}},
	}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func members(n int, mutate func(*v1.Pod)) []*v1.Pod {
	var out []*v1.Pod
	for i := range n {
		out = append(out, member(i, mutate))
	}
	return out
}

var trainSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "train"}}

func antiAffinity(p *v1.Pod) {
	p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
		TopologyKey: "kubernetes.io/hostname", LabelSelector: trainSelector,
	}}}}
}

// shipped builds the shipped profile over nodes running bound.
func shipped(t *testing.T, nodes []*v1.Node, bound ...*v1.Pod) (*Profile, []fwk.NodeInfo) {
	t.Helper()
	prof, err := LoadProfile(manifests.SchedulerConfig, "muster-scheduler")
	if err != nil {
		t.Fatal(err)
	}
	var infos []fwk.NodeInfo
	for _, n := range nodes {
		var pods []*v1.Pod
		for _, p := range bound {
			if p.Spec.NodeName == n.Name {
				pods = append(pods, p)
			}
		}
		ni := framework.NewNodeInfo(pods...)
		ni.SetNode(n)
		infos = append(infos, ni)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	p, err := NewProfile(ctx, prof, NewSnapshot(infos), Objects{})
	if err != nil {
		t.Fatal(err)
	}
	return p, infos
}

// perNode renders a plan as "node=count" sorted.
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

func TestShippedProfileLeavesOutOnlyTheGangPlugin(t *testing.T) {
	for _, native := range []bool{false, true} {
		t.Run(fmt.Sprintf("GenericWorkload=%v", native), func(t *testing.T) {
			// muster-scheduler turns the gate on where the cluster serves
			// native pod groups; the in-tree plugins then read more of the
			// framework.
			featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.GenericWorkload, native)
			p, infos := shipped(t, []*v1.Node{node("n1", "a", 4)})
			if diff := cmp.Diff([]string{"MusterGang: not an in-tree plugin"}, p.LeftOut); diff != "" {
				t.Errorf("LeftOut (-want, +got):\n%s", diff)
			}
			if _, err := plan.Compute(context.Background(), plan.Request{Gang: "team/g", MinMember: 2, Pending: members(2, antiAffinity),
				Nodes: infos, Filter: p.Filter()}); err == nil {
				t.Error("two members with anti-affinity on one node: want no placement")
			}
		})
	}
}

func TestShippedProfileJudgesGangs(t *testing.T) {
	four := []*v1.Node{node("a1", "a", 4), node("a2", "a", 4), node("b1", "b", 4), node("b2", "b", 4)}
	noSchedule := v1.Taint{Key: "maintenance", Effect: v1.TaintEffectNoSchedule}
	for _, tc := range []struct {
		name    string
		nodes   []*v1.Node
		members []*v1.Pod
		// want is the plan's members per node, or the start of the
		// refusal after "gang team/g: ".
		want string
	}{
		{"anti-affinity, one member per node", four, members(4, antiAffinity), "a1=1,a2=1,b1=1,b2=1"},
		{"anti-affinity, one member too many", four, members(5, antiAffinity),
			"needs room for 5 members; best placement fits 4 of 5 members; with 4 members placed, the filters refuse the next"},
		{"zone spread, maxSkew 1", four, members(6, func(p *v1.Pod) {
			p.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone",
				WhenUnsatisfiable: v1.DoNotSchedule, LabelSelector: trainSelector}}
		}), "zones a=3,b=3"},
		{"required affinity to itself, per zone", four, members(6, func(p *v1.Pod) {
			p.Spec.Affinity = &v1.Affinity{PodAffinity: &v1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
				TopologyKey: "topology.kubernetes.io/zone", LabelSelector: trainSelector,
			}}}}
		}), "zones a=6"},
		{"host ports, one per node", []*v1.Node{node("a1", "a", 4)}, members(2, func(p *v1.Pod) {
			p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 29500, HostPort: 29500, Protocol: v1.ProtocolTCP}}
		}), "needs room for 2 members; best placement fits 1 of 2 members"},
		{"taints", []*v1.Node{node("a1", "a", 4, noSchedule), node("a2", "a", 4)}, members(6, nil),
			"needs 6 nvidia.com/gpu for 6 members (1 per member); best placement fits 4 of 6 members (free nvidia.com/gpu per node: 4,4); 1 of 2 nodes rejected by other filters"},
		{"node selector", four, members(4, func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"topology.kubernetes.io/zone": "b"} }),
			"b1=4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, infos := shipped(t, tc.nodes)
			res, err := plan.Compute(context.Background(), plan.Request{Gang: "team/g", MinMember: len(tc.members),
				Pending: tc.members, Nodes: infos, Filter: p.Filter()})
			var noPlace *plan.NoPlacementError
			switch {
			case errors.As(err, &noPlace):
				if got := strings.TrimPrefix(noPlace.Message, "gang team/g: "); !strings.HasPrefix(got, tc.want) {
					t.Errorf("refusal %q, want it to start %q", got, tc.want)
				}
			case err != nil:
				t.Fatal(err)
			case strings.HasPrefix(tc.want, "zones "):
				if got := "zones " + perZone(res.Assignments, tc.nodes); got != tc.want {
					t.Errorf("got %s, want %s", got, tc.want)
				}
			default:
				if got := perNode(res.Assignments); got != tc.want {
					t.Errorf("got %s, want %s", got, tc.want)
				}
			}
		})
	}
}

func perZone(a map[types.UID]string, nodes []*v1.Node) string {
	zone := map[string]string{}
	for _, n := range nodes {
		zone[n.Name] = n.Labels["topology.kubernetes.io/zone"]
	}
	c := map[string]int{}
	for _, n := range a {
		c[zone[n]]++
	}
	var parts []string
	for z, k := range c {
		parts = append(parts, fmt.Sprintf("%s=%d", z, k))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// TestWithoutForgetsRemovedPods: a bound pod whose anti-affinity repels
// the members keeps them off its node; once removed (a victim), the
// filters' cluster-wide state forgets it too.
func TestWithoutForgetsRemovedPods(t *testing.T) {
	blocker := member(99, func(p *v1.Pod) {
		p.Name, p.UID, p.Labels = "blocker", "uid-blocker", map[string]string{"app": "other"}
		p.Spec.NodeName = "a1"
		antiAffinity(p) // against app=train
	})
	p, infos := shipped(t, []*v1.Node{node("a1", "a", 4)}, blocker)
	req := plan.Request{Gang: "team/g", MinMember: 1, Pending: members(1, nil), Nodes: infos, Filter: p.Filter()}
	if _, err := plan.Compute(context.Background(), req); err == nil {
		t.Fatal("want no placement beside a pod whose anti-affinity refuses the member")
	}
	pi, err := framework.NewPodInfo(blocker)
	if err != nil {
		t.Fatal(err)
	}
	without := infos[0].Snapshot()
	if err := without.RemovePod(klogless(), blocker); err != nil {
		t.Fatal(err)
	}
	req.Nodes = []fwk.NodeInfo{without}
	req.Removed = []plan.PodOnNode{{Pod: pi, Node: infos[0]}}
	res, err := plan.Compute(context.Background(), req)
	if err != nil {
		t.Fatalf("with the blocker removed: %v", err)
	}
	if got := perNode(res.Assignments); got != "a1=1" {
		t.Errorf("got %s, want a1=1", got)
	}
}

package plan

import (
	"context"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// fakeDevices gives every pod with a claim a request of per
// devices of one dimension, and each node free[node] of them; on nodes
// listed in extended, it counts the extended resource gpu too.
type fakeDevices struct {
	per      int64
	free     map[string]int64
	extended map[string]int64
}

const claimDim = v1.ResourceName("devices of class gpu.example.com")

func (f fakeDevices) Request(pod *v1.Pod) map[v1.ResourceName]int64 {
	if len(pod.Spec.ResourceClaims) == 0 {
		return nil
	}
	return map[v1.ResourceName]int64{claimDim: f.per}
}

func (f fakeDevices) Free(n *v1.Node, name v1.ResourceName) (int64, bool) {
	switch name {
	case claimDim:
		return f.free[n.Name], true
	case gpu:
		q, ok := f.extended[n.Name]
		return q, ok
	}
	return 0, false
}

func claiming(ps []*v1.Pod) []*v1.Pod {
	for _, p := range ps {
		p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpus"}}
	}
	return ps
}

// Members whose claims take a node's devices go one per node, however much
// CPU the nodes have; what the devices cannot hold is named as the
// bottleneck; a DRA-backed extended resource counts the node's devices
// where its allocatable has none.
func TestPlanCountsDevices(t *testing.T) {
	nodes := func(free ...int64) ([]fwk.NodeInfo, map[string]int64) {
		var out []fwk.NodeInfo
		m := map[string]int64{}
		for i, f := range free {
			name := fmt.Sprintf("n%d", i)
			out = append(out, nodeInfo(name, 0, nil, nil))
			m[name] = f
		}
		return out, m
	}
	cases := []struct {
		name      string
		free      []int64
		members   int
		per       int64
		extended  bool
		wantNodes int    // distinct nodes of the plan; 0: no plan
		wantMsg   string // in the refusal
	}{
		{name: "one member per node", free: []int64{4, 4, 4, 4}, members: 4, per: 4, wantNodes: 4},
		{name: "two per node", free: []int64{4, 4}, members: 4, per: 2, wantNodes: 2},
		{name: "fragments left by another gang", free: []int64{1, 1, 4, 4}, members: 4, per: 2, wantNodes: 2},
		{name: "too few devices", free: []int64{4, 4, 4, 0}, members: 4, per: 4, wantMsg: "needs 16 devices of class gpu.example.com for 4 members (4 per member); best placement fits 3 of 4 members (free devices of class gpu.example.com per node: 4,4,4,0)"},
		{name: "extended resource from devices", free: []int64{4, 4, 4, 4}, members: 4, per: 4, extended: true, wantNodes: 4},
		{name: "extended resource short", free: []int64{4, 2}, members: 2, per: 4, extended: true, wantMsg: "needs 8 nvidia.com/gpu"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			infos, free := nodes(tc.free...)
			dev := fakeDevices{per: tc.per, free: free}
			var pending []*v1.Pod
			if tc.extended {
				dev.extended = free
				pending = pods("m", tc.members, tc.per)
			} else {
				pending = claiming(pods("m", tc.members, 0))
			}
			p, err := Compute(context.Background(), Request{Gang: "ns/g", MinMember: tc.members, Pending: pending, Nodes: infos, Devices: dev})
			if tc.wantMsg != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantMsg) {
					t.Fatalf("err %v, want one saying %q", err, tc.wantMsg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			used := map[string]int64{}
			for _, n := range p.Assignments {
				used[n] += tc.per
			}
			for n, u := range used {
				if u > free[n] {
					t.Errorf("node %s: %d devices planned, %d free", n, u, free[n])
				}
			}
			if len(used) != tc.wantNodes {
				t.Errorf("plan on %d nodes (%v), want %d", len(used), p.Assignments, tc.wantNodes)
			}
		})
	}
}

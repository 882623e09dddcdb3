package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/localcluster"
)

// draPool gives a DRA test its namespace, a muster scheduler of its own and
// n nodes (racks of 2) without nvidia.com/gpu whose GPUs are published only as
// ResourceSlices of perNode devices each, under the DeviceClass
// gpu.nvidia.com (mapping nvidia.com/gpu to them when extended is set).
// The class and the slices go when t ends.
func draPool(t *testing.T, prefix string, n, perNode int, extended bool) (ns, sched string, nodes []*corev1.Node) {
	t.Helper()
	ctx := context.Background()
	ns = testNamespace(t, prefix)
	sched = "muster-" + ns
	startGangScheduler(t, sched, nil)
	testPool(t, ns, n, func(i int) localcluster.NodeSpec {
		return localcluster.NodeSpec{Labels: localcluster.Topology{NodesPerRack: 2}.Labels(i)}
	})
	list, err := controlPlane.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: localcluster.PoolLabel + "=" + ns})
	if err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		nodes = append(nodes, &list.Items[i])
	}
	if err := controlPlane.EnsureGPUDeviceClass(ctx, extended); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := controlPlane.Client.ResourceV1().DeviceClasses().Delete(ctx, localcluster.DRAGPUDriver, metav1.DeleteOptions{}); err != nil {
			t.Error(err)
		}
	})
	if err := controlPlane.PublishGPUs(ctx, nodes, localcluster.DRAGPUs{PerNode: perNode}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := controlPlane.DeleteGPUSlices(ctx, nodes); err != nil {
			t.Error(err)
		}
	})
	return ns, sched, nodes
}

// gpuClaimTemplate asks for count GPUs of the class gpu.nvidia.com.
func gpuClaimTemplate(t *testing.T, ns, name string, count int64) {
	t.Helper()
	if _, err := controlPlane.Client.ResourceV1().ResourceClaimTemplates(ns).Create(context.Background(), localcluster.GPUClaimTemplate(name, count), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// withClaimTemplate makes the pod's container use a claim made from
// template.
func withClaimTemplate(template string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: "gpus", ResourceClaimTemplateName: ptr.To(template)})
		c := &p.Spec.Containers[0]
		c.Resources.Claims = append(c.Resources.Claims, corev1.ResourceClaim{Name: "gpus"})
	}
}

// claimedDevices checks that every bound pod of gang in ns has its claims
// allocated with devices of its own node and returns the devices, failing
// t when two pods share one.
func claimedDevices(t *testing.T, ns, gang string) map[string]string {
	t.Helper()
	ctx := context.Background()
	pods, err := controlPlane.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "gang=" + gang})
	if err != nil {
		t.Fatal(err)
	}
	owner := map[string]string{}
	for _, p := range pods.Items {
		var names []string
		for _, s := range p.Status.ResourceClaimStatuses {
			if s.ResourceClaimName != nil {
				names = append(names, *s.ResourceClaimName)
			}
		}
		if s := p.Status.ExtendedResourceClaimStatus; s != nil {
			names = append(names, s.ResourceClaimName)
		}
		if len(names) == 0 {
			t.Fatalf("pod %s has no claim", p.Name)
		}
		for _, name := range names {
			c, err := controlPlane.Client.ResourceV1().ResourceClaims(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if c.Status.Allocation == nil {
				t.Fatalf("claim %s of pod %s (node %s) is not allocated", name, p.Name, p.Spec.NodeName)
			}
			for _, r := range c.Status.Allocation.Devices.Results {
				id := r.Pool + "/" + r.Device
				if r.Pool != p.Spec.NodeName {
					t.Errorf("pod %s on %s holds device %s of another node", p.Name, p.Spec.NodeName, id)
				}
				if o, dup := owner[id]; dup {
					t.Errorf("device %s held by pods %s and %s", id, o, p.Name)
				}
				owner[id] = p.Name
			}
		}
	}
	return owner
}

// checkAttempts fails t when the members of gang reached the plugin more
// often than a few plans' worth: the sign of a re-plan loop.
func checkAttempts(t *testing.T, ns, gang string, members int) {
	t.Helper()
	pre, permit := gangAttempts(types.NamespacedName{Namespace: ns, Name: gang})
	t.Logf("gang %s: %d PreFilter, %d Permit for %d members", gang, pre, permit, members)
	if pre > 4*members+4 || permit > 2*members {
		t.Errorf("gang %s: %d PreFilter and %d Permit calls for %d members, want at most %d and %d (re-planned in a loop?)", gang, pre, permit, members, 4*members+4, 2*members)
	}
}

// A gang whose GPUs are DRA claims made from a template binds whole, one
// member per node since each takes a node's four devices, with every one
// of the 16 devices allocated once; a second such gang binds nothing and
// says which devices it lacks; neither gang is planned in a loop.
func TestDRAGangOfClaimsBindsWhole(t *testing.T) {
	ns, sched, _ := draPool(t, "dra-gang-", 4, 4, false)
	gpuClaimTemplate(t, ns, "four", 4)
	createPodGroup(t, ns, "a", 4, nil)
	createGangPods(t, ns, 4, podSpec{name: "a", scheduler: sched, pool: ns, gang: "a", mutate: withClaimTemplate("four")})
	waitGangBound(t, ns, "a", 4, localcluster.ShortTimeout)
	devices := claimedDevices(t, ns, "a")
	if len(devices) != 16 {
		t.Errorf("gang a holds %d devices, want 16", len(devices))
	}
	pods, err := controlPlane.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "gang=a"})
	if err != nil {
		t.Fatal(err)
	}
	onNode := map[string]bool{}
	for _, p := range pods.Items {
		onNode[p.Spec.NodeName] = true
	}
	if len(onNode) != 4 {
		t.Errorf("gang a on %d nodes, want 4", len(onNode))
	}

	createPodGroup(t, ns, "b", 4, nil)
	createGangPods(t, ns, 4, podSpec{name: "b", scheduler: sched, pool: ns, gang: "b", mutate: withClaimTemplate("four")})
	cond := waitUnschedulable(t, ns, "b-0", "devices of class "+localcluster.DRAGPUDriver, localcluster.ShortTimeout)
	if !strings.Contains(cond.Message, "needs 16") {
		t.Errorf("gang b's reason %q does not say it needs 16 devices", cond.Message)
	}
	noneBound(t, ns, "b", localcluster.ShortTimeout/6)
	checkAttempts(t, ns, "a", 4)
}

// Fragmentation with DRA: a gang of 2 members of 3 GPUs, then one of 4
// members of 2 GPUs on 4 nodes of 4 (14 of 16 devices) both bind whole
// without a re-plan loop: the planner counts the devices the members
// planned on one node take together.
func TestDRAGangsShareNodesByDevice(t *testing.T) {
	ns, sched, _ := draPool(t, "dra-frag-", 4, 4, false)
	gpuClaimTemplate(t, ns, "three", 3)
	gpuClaimTemplate(t, ns, "two", 2)
	createPodGroup(t, ns, "x", 2, nil)
	createGangPods(t, ns, 2, podSpec{name: "x", scheduler: sched, pool: ns, gang: "x", mutate: withClaimTemplate("three")})
	waitGangBound(t, ns, "x", 2, localcluster.ShortTimeout)
	createPodGroup(t, ns, "y", 4, nil)
	createGangPods(t, ns, 4, podSpec{name: "y", scheduler: sched, pool: ns, gang: "y", mutate: withClaimTemplate("two")})
	waitGangBound(t, ns, "y", 4, localcluster.ShortTimeout)
	held := claimedDevices(t, ns, "x")
	for id, p := range claimedDevices(t, ns, "y") {
		if o, dup := held[id]; dup {
			t.Errorf("device %s held by pods %s and %s", id, o, p)
		}
		held[id] = p
	}
	if len(held) != 14 {
		t.Errorf("%d devices held, want 14", len(held))
	}
	checkAttempts(t, ns, "x", 2)
	checkAttempts(t, ns, "y", 4)
}

// DRA-backed extended resources: pods asking for nvidia.com/gpu on nodes
// that publish GPUs only as devices of a DeviceClass mapping that name get
// devices; the gang binds whole, one member per node, and a second gang
// that does not fit binds nothing.
func TestDRAExtendedResourceGang(t *testing.T) {
	ns, sched, _ := draPool(t, "dra-ext-", 4, 4, true)
	createPodGroup(t, ns, "a", 4, nil)
	createGangPods(t, ns, 4, podSpec{name: "a", scheduler: sched, pool: ns, gang: "a", gpus: 4})
	waitGangBound(t, ns, "a", 4, localcluster.ShortTimeout)
	if n := len(claimedDevices(t, ns, "a")); n != 16 {
		t.Errorf("gang a holds %d devices, want 16", n)
	}
	createPodGroup(t, ns, "b", 2, nil)
	createGangPods(t, ns, 2, podSpec{name: "b", scheduler: sched, pool: ns, gang: "b", gpus: 2})
	waitUnschedulable(t, ns, "b-0", "nvidia.com/gpu", localcluster.ShortTimeout)
	noneBound(t, ns, "b", localcluster.ShortTimeout/6)
	checkAttempts(t, ns, "a", 4)
}

// The ComputeDomain pattern: members of a gang share one ResourceClaim for
// a channel of a multi-node NVLink clique (here a rack of 2 nodes), whose
// device every node of the clique reaches. The gang must land inside one
// clique: with one node of the first rack full, it goes whole to the
// second rack, the shared claim allocated once for it, instead of being
// spread over both racks and planned again and again.
func TestDRAGangSharesOneClaim(t *testing.T) {
	ctx := context.Background()
	ns, sched, nodes := draPool(t, "dra-shared-", 4, 4, false)
	if _, err := controlPlane.Client.ResourceV1().DeviceClasses().Create(ctx, localcluster.ChannelDeviceClass(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := controlPlane.Client.ResourceV1().DeviceClasses().Delete(ctx, localcluster.ChannelClass, metav1.DeleteOptions{}); err != nil {
			t.Error(err)
		}
	})
	channels, err := controlPlane.PublishChannels(ctx, nodes, localcluster.RackLabel)
	t.Cleanup(func() {
		for _, name := range channels {
			if err := controlPlane.Client.ResourceV1().ResourceSlices().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				t.Error(err)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(channels) != 2 {
		t.Fatalf("channels %v, want one per rack", channels)
	}
	gpuClaimTemplate(t, ns, "four", 4)
	// The first node's GPUs are taken.
	first := nodes[0]
	for _, n := range nodes {
		if n.Name < first.Name {
			first = n
		}
	}
	filler := makePod(ns, podSpec{name: "filler", scheduler: sched, pool: ns, mutate: withClaimTemplate("four"),
		annotations: map[string]string{api.AnnotationGrouping: api.GroupingNone}})
	filler.Spec.NodeSelector[localcluster.HostnameLabel] = first.Name
	filler.Labels["gang"] = "filler"
	if _, err := controlPlane.Client.CoreV1().Pods(ns).Create(ctx, filler, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGangBound(t, ns, "filler", 1, localcluster.ShortTimeout)

	if _, err := controlPlane.Client.ResourceV1().ResourceClaims(ns).Create(ctx, &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "domain"},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name:    "channel",
			Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: localcluster.ChannelClass, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1},
		}}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createPodGroup(t, ns, "d", 2, nil)
	createGangPods(t, ns, 2, podSpec{name: "d", scheduler: sched, pool: ns, gang: "d", mutate: func(p *corev1.Pod) {
		withClaimTemplate("four")(p)
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: "domain", ResourceClaimName: ptr.To("domain")})
		p.Spec.Containers[0].Resources.Claims = append(p.Spec.Containers[0].Resources.Claims, corev1.ResourceClaim{Name: "domain"})
	}})
	waitGangBound(t, ns, "d", 2, localcluster.ShortTimeout)
	rackOf := map[string]string{}
	for _, n := range nodes {
		rackOf[n.Name] = n.Labels[localcluster.RackLabel]
	}
	pods, err := controlPlane.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "gang=d"})
	if err != nil {
		t.Fatal(err)
	}
	racks := map[string]bool{}
	for _, p := range pods.Items {
		racks[rackOf[p.Spec.NodeName]] = true
		if p.Spec.NodeName == first.Name {
			t.Errorf("member %s on the full node %s", p.Name, first.Name)
		}
	}
	if len(racks) != 1 {
		t.Errorf("gang d spread over racks %v, want one", racks)
	}
	claim, err := controlPlane.Client.ResourceV1().ResourceClaims(ns).Get(ctx, "domain", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if claim.Status.Allocation == nil || len(claim.Status.ReservedFor) != 2 {
		t.Errorf("shared claim: allocation %+v, reserved for %v; want allocated once for both members", claim.Status.Allocation, claim.Status.ReservedFor)
	}
	checkAttempts(t, ns, "d", 2)
}

// One cluster, two kinds of GPU nodes: two publish nvidia.com/gpu as an
// extended resource, two only as DRA devices of the class that maps it. A
// gang of 4 members asking for 4 nvidia.com/gpu each binds whole across
// both kinds, one member per node, the DRA members' GPUs allocated as
// devices.
func TestDRAMixedNodesGang(t *testing.T) {
	ctx := context.Background()
	ns, sched, _ := draPool(t, "dra-mixed-", 2, 4, true)
	if _, err := controlPlane.CreateNodes(ctx, 2, func(i int) localcluster.NodeSpec {
		return localcluster.NodeSpec{Name: fmt.Sprintf("%s-ext-%d", ns, i), GPUs: 4, Pool: ns}
	}); err != nil {
		t.Fatal(err)
	}
	createPodGroup(t, ns, "m", 4, nil)
	createGangPods(t, ns, 4, podSpec{name: "m", scheduler: sched, pool: ns, gang: "m", gpus: 4})
	waitGangBound(t, ns, "m", 4, localcluster.ShortTimeout)
	pods, err := controlPlane.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "gang=m"})
	if err != nil {
		t.Fatal(err)
	}
	onNode, viaDevices := map[string]bool{}, 0
	for _, p := range pods.Items {
		onNode[p.Spec.NodeName] = true
		if p.Status.ExtendedResourceClaimStatus != nil {
			viaDevices++
		}
	}
	if len(onNode) != 4 || viaDevices != 2 {
		t.Errorf("gang m on %d nodes, %d members with devices; want 4 nodes, 2 of them DRA", len(onNode), viaDevices)
	}
	checkAttempts(t, ns, "m", 4)
}

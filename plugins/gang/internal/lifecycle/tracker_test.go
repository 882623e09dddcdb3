package lifecycle

import (
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/muster-io/muster/plugins/gang/plan"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// fakeCluster is the scheduler as the tracker sees it: members per gang,
// the pods it activated, the pods waiting at Permit and the nominations
// dropped. It records what the tracker asks; it filters nothing.
type fakeCluster struct {
	mu          sync.Mutex
	members     map[types.NamespacedName][]*v1.Pod
	activated   map[string]bool
	waiting     map[types.UID]*fakeWaitingPod
	unnominated []string
	gone        map[types.UID]bool
	// onActivate, when set, gets the names of each Activate call.
	onActivate chan []string
}

func newFakeCluster() *fakeCluster {
	return &fakeCluster{
		members:   map[types.NamespacedName][]*v1.Pod{},
		activated: map[string]bool{},
		waiting:   map[types.UID]*fakeWaitingPod{},
		gone:      map[types.UID]bool{},
	}
}

func (c *fakeCluster) Members(key types.NamespacedName) []*v1.Pod {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.members[key])
}

func (c *fakeCluster) Activate(pods ...*v1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var batch []string
	for _, p := range pods {
		c.activated[p.Name] = true
		batch = append(batch, p.Name)
	}
	if c.onActivate != nil && len(batch) > 0 {
		slices.Sort(batch)
		c.onActivate <- batch
	}
}

func (c *fakeCluster) WaitingPod(uid types.UID) fwk.WaitingPod {
	c.mu.Lock()
	defer c.mu.Unlock()
	if wp, ok := c.waiting[uid]; ok {
		return wp
	}
	return nil
}

func (c *fakeCluster) DeleteNomination(pod *v1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.unnominated = append(c.unnominated, pod.Name)
}

func (c *fakeCluster) VictimGone(victim *v1.Pod) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gone[victim.UID]
}

// takeActivated returns the names activated since the last call, sorted.
func (c *fakeCluster) takeActivated() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := slices.Sorted(maps.Keys(c.activated))
	c.activated = map[string]bool{}
	return out
}

// wait puts pods at Permit, as the framework does after Permit says Wait.
func (c *fakeCluster) wait(pods ...*v1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range pods {
		c.waiting[p.UID] = &fakeWaitingPod{pod: p}
	}
}

// fakeWaitingPod is a pod waiting at Permit; it is allowed or rejected once.
type fakeWaitingPod struct {
	mu       sync.Mutex
	pod      *v1.Pod
	allowed  bool
	rejected string
}

func (w *fakeWaitingPod) GetPod() *v1.Pod             { return w.pod }
func (w *fakeWaitingPod) GetPendingPlugins() []string { return nil }
func (w *fakeWaitingPod) Preempt(_, msg string) bool  { return w.Reject("", msg) }
func (w *fakeWaitingPod) outcome() (bool, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.allowed, w.rejected
}
func (w *fakeWaitingPod) decided() bool { a, r := w.outcome(); return a || r != "" }
func (w *fakeWaitingPod) Allow(string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.allowed = w.rejected == ""
}
func (w *fakeWaitingPod) Reject(_, msg string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.allowed || w.rejected != "" {
		return false
	}
	w.rejected = msg
	return true
}

const testBackoff = time.Hour

// newTracker returns a tracker on a fake cluster and a fake clock. The
// backoff is long enough that no retry timer fires during a test.
func newTracker(t *testing.T) (*Tracker, *fakeCluster, *testingclock.FakeClock) {
	t.Helper()
	c := newFakeCluster()
	clk := testingclock.NewFakeClock(t0)
	return New(Config{Name: "Test", Clock: clk, Backoff: testBackoff, Cluster: c}), c, clk
}

func gangKey(name string) types.NamespacedName {
	return types.NamespacedName{Namespace: "ns", Name: name}
}

type podOpt func(*v1.Pod)

func bound(node string) podOpt { return func(p *v1.Pod) { p.Spec.NodeName = node } }

func finished(p *v1.Pod) { p.Status.Phase = v1.PodSucceeded }

func pod(name string, opts ...podOpt) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)}}
	for _, o := range opts {
		o(p)
	}
	return p
}

// gang registers the members of gang name with the fake cluster.
func (c *fakeCluster) gang(name string, pods ...*v1.Pod) []*v1.Pod {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.members[gangKey(name)] = pods
	return pods
}

// planOf places pods on nodes, one node per pod, and returns the plan with
// the pods' infos.
func planOf(t *testing.T, pods []*v1.Pod, nodes ...string) (*plan.Plan, map[types.UID]fwk.PodInfo) {
	t.Helper()
	p := &plan.Plan{Assignments: map[types.UID]string{}}
	infos := map[types.UID]fwk.PodInfo{}
	for i, m := range pods {
		p.Assignments[m.UID] = nodes[i]
		pi, err := framework.NewPodInfo(m)
		if err != nil {
			t.Fatal(err)
		}
		infos[m.UID] = pi
	}
	return p, infos
}

// storePlan stores a plan of pods on nodes for gang name, expiring at
// expires.
func storePlan(t *testing.T, tr *Tracker, name string, expires time.Time, pods []*v1.Pod, nodes ...string) {
	t.Helper()
	p, infos := planOf(t, pods, nodes...)
	g := tr.Lock(gangKey(name))
	g.StorePlan(p, infos, expires)
	g.Unlock()
}

// heldNames is Held as node → sorted pod names.
func heldNames(held map[string][]fwk.PodInfo) map[string][]string {
	out := map[string][]string{}
	for node, pis := range held {
		for _, pi := range pis {
			out[node] = append(out[node], pi.GetPod().Name)
		}
		slices.Sort(out[node])
	}
	return out
}

func TestInspectAndDelete(t *testing.T) {
	tr, c, _ := newTracker(t)
	pods := c.gang("g", pod("a"), pod("b"))
	if info := tr.Inspect(gangKey("g")); info.Known || tr.Len() != 0 {
		t.Fatalf("fresh tracker: %+v, %d gangs, want nothing known", info, tr.Len())
	}
	tr.Reserve(gangKey("g"), pods[0].UID, "n1")
	c.wait(pods[1])
	if _, wait := tr.Permit(gangKey("g"), pods[1].UID, 3, time.Minute, func(types.NamespacedName, *Barrier) {}); !wait {
		t.Fatal("Permit below the quorum let the member go")
	}
	info := tr.Inspect(gangKey("g"))
	if !info.Known || info.AtPermit != 1 || info.Reserved[pods[0].UID] != "n1" || tr.Len() != 1 {
		t.Errorf("after a reservation and a wait: %+v, %d gangs", info, tr.Len())
	}
	// Deleting the PodGroup forgets the gang, not the members at Permit:
	// a PodGroup of the same name may come back while they wait.
	tr.Delete(gangKey("g"))
	if info := tr.Inspect(gangKey("g")); info.Known || info.AtPermit != 1 || tr.Len() != 0 {
		t.Errorf("after Delete: %+v, %d gangs, want the gang gone and its member at Permit kept", info, tr.Len())
	}
}

// names are the pods' names, sorted.
func names(pods []*v1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	slices.Sort(out)
	return out
}

package podgrouper

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-io/muster/api"
)

// eventReasonPriorityMixed: members of one gang carry different priorities.
const eventReasonPriorityMixed = "GangPriorityMixed"

// podPriority is what a member contributes to its gang's priority. Pods
// carry spec.priority once the API server's Priority admission resolved
// their priorityClassName; set is false for a pod without it (admission
// off), which then contributes nothing.
type podPriority struct {
	value int32
	class string
	set   bool
}

func priorityOf(pod *corev1.Pod) podPriority {
	if pod.Spec.Priority == nil {
		return podPriority{}
	}
	return podPriority{value: *pod.Spec.Priority, class: pod.Spec.PriorityClassName, set: true}
}

// gangPriority is the priority of a gang: the highest of its members'.
type gangPriority struct {
	podPriority
	// values are the distinct member priorities, highest first; more than
	// one means the gang is mixed.
	values []podPriority
}

func (g gangPriority) mixed() bool { return len(g.values) > 1 }

// combine folds member priorities into the gang's. The highest value wins;
// of several classes with that value the first by name, so every member's
// sync computes the same annotations.
func combine(members []podPriority) gangPriority {
	var g gangPriority
	for _, m := range members {
		if !m.set {
			continue
		}
		if !slices.Contains(g.values, m) {
			g.values = append(g.values, m)
		}
	}
	slices.SortFunc(g.values, func(a, b podPriority) int {
		if c := cmp.Compare(b.value, a.value); c != 0 {
			return c
		}
		return strings.Compare(a.class, b.class)
	})
	if len(g.values) > 0 {
		g.podPriority = g.values[0]
	}
	return g
}

// describe lists the distinct member priorities for a note.
func (g gangPriority) describe() string {
	parts := make([]string, len(g.values))
	for i, v := range g.values {
		parts[i] = v.String()
	}
	return strings.Join(parts, ", ")
}

func (p podPriority) String() string {
	if p.class == "" {
		return strconv.Itoa(int(p.value))
	}
	return fmt.Sprintf("%d (%s)", p.value, p.class)
}

// setPriority writes g into pg's annotations (pg is a desired PodGroup, ours
// to change), or removes them when no member has a priority.
func setPriority(pg *schedv1alpha1.PodGroup, g gangPriority) {
	if !g.set {
		delete(pg.Annotations, api.AnnotationPriority)
		delete(pg.Annotations, api.AnnotationPriorityClass)
		return
	}
	if pg.Annotations == nil {
		pg.Annotations = map[string]string{}
	}
	pg.Annotations[api.AnnotationPriority] = strconv.Itoa(int(g.value))
	pg.Annotations[api.AnnotationPriorityClass] = g.class
}

// memberPriorities remembers the priority of every member of every gang
// this process knows, and per gang how many members have each distinct
// priority, so that a gang's priority costs one step per distinct value,
// not per member (a gang may have 100,000 members, each synced).
//
// The label index alone would lag: members of a new gang are synced
// concurrently and each writes the PodGroup before its own label is in the
// cache, so a member could lower the priority another one just wrote. Each
// sync records its pod here before computing the gang's priority under the
// PodGroup's lock, so the last computation of a gang sees every member
// synced so far. Members only the cache shows (labelled by an earlier
// process) are added once per gang when the gang is first computed (seed).
type memberPriorities struct {
	mu     sync.Mutex
	gangOf map[string]string // pod key → PodGroup key
	gangs  map[string]*gangMembers
}

type gangMembers struct {
	pods   map[string]podPriority // pod key → priority
	counts map[podPriority]int    // distinct priority → members with it
	seeded bool
}

func newMemberPriorities() *memberPriorities {
	return &memberPriorities{gangOf: map[string]string{}, gangs: map[string]*gangMembers{}}
}

// set records pod (key) as a member of gang with priority p.
func (m *memberPriorities) set(pod, gang string, p podPriority) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gangOf[pod] == gang && m.gangs[gang].pods[pod] == p {
		return
	}
	m.removeLocked(pod)
	m.addLocked(pod, gang, p)
}

func (m *memberPriorities) addLocked(pod, gang string, p podPriority) {
	g := m.gangs[gang]
	if g == nil {
		g = &gangMembers{pods: map[string]podPriority{}, counts: map[podPriority]int{}}
		m.gangs[gang] = g
	}
	m.gangOf[pod] = gang
	g.pods[pod] = p
	g.counts[p]++
}

// remove forgets pod and returns the gang it was in and its priority.
func (m *memberPriorities) remove(pod string) (gang string, p podPriority, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.removeLocked(pod)
}

func (m *memberPriorities) removeLocked(pod string) (string, podPriority, bool) {
	gang, ok := m.gangOf[pod]
	if !ok {
		return "", podPriority{}, false
	}
	g := m.gangs[gang]
	p := g.pods[pod]
	delete(m.gangOf, pod)
	delete(g.pods, pod)
	if g.counts[p]--; g.counts[p] == 0 {
		delete(g.counts, p)
	}
	if len(g.pods) == 0 {
		delete(m.gangs, gang)
	}
	return gang, p, true
}

// seed adds the members of gang the cache shows, once per gang: pods not
// recorded yet (labelled by an earlier process) count with their priority.
//
// cached runs under m.mu: a pod the cache drops meanwhile is either not
// returned or removed by its delete handler after seed (handlers run after
// the cache is updated, and remove waits for m.mu), never left behind.
func (m *memberPriorities) seed(gang string, cached func() []*corev1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if g := m.gangs[gang]; g != nil && g.seeded {
		return
	}
	for _, pod := range cached() {
		key := pod.Namespace + "/" + pod.Name
		if _, known := m.gangOf[key]; !known {
			m.addLocked(key, gang, priorityOf(pod))
		}
	}
	if g := m.gangs[gang]; g != nil {
		g.seeded = true
	}
}

// priority combines the recorded members' priorities of gang.
func (m *memberPriorities) priority(gang string) gangPriority {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.gangs[gang]
	if g == nil {
		return gangPriority{}
	}
	distinct := make([]podPriority, 0, len(g.counts))
	for p := range g.counts {
		distinct = append(distinct, p)
	}
	return combine(distinct)
}

// anyMember returns a recorded member of gang other than except.
func (m *memberPriorities) anyMember(gang, except string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if g := m.gangs[gang]; g != nil {
		for k := range g.pods {
			if k != except {
				return k, true
			}
		}
	}
	return "", false
}

// gangPriorityOf computes the priority of PodGroup ns/name from its members:
// those this process synced and, once per gang, those the pod cache shows
// labelled (after a restart, before every member is synced again).
// Terminating pods still count: they hold their room until they are gone.
func (c *Controller) gangPriorityOf(ns, name string) gangPriority {
	gangKey := ns + "/" + name
	c.priorities.seed(gangKey, func() []*corev1.Pod {
		objs, err := c.podIndexer.ByIndex(podGroupIndex, gangKey)
		if err != nil {
			return nil
		}
		pods := make([]*corev1.Pod, 0, len(objs))
		for _, o := range objs {
			if pod, ok := o.(*corev1.Pod); ok {
				pods = append(pods, pod)
			}
		}
		return pods
	})
	return c.priorities.priority(gangKey)
}

// notePriorityMixed warns, on the workload (rate-limited like GangUnknown)
// and once on a member whose priority is below its gang's, that the gang's
// members differ in priority and which one the gang uses.
func (c *Controller) notePriorityMixed(d *decision, pod *corev1.Pod, g gangPriority) {
	if !g.mixed() {
		return
	}
	note := api.CapReason(fmt.Sprintf("Members of gang %s have different priorities (%s); the gang is scheduled and preempted with the highest, %s. Give every pod template of the workload the same priorityClassName",
		d.pgName, g.describe(), g.podPriority))
	c.noteWorkload(d.workload, corev1.EventTypeWarning, eventReasonPriorityMixed, note)
	if p := priorityOf(pod); p.set && p.value < g.value {
		c.noteOnce(pod, corev1.EventTypeWarning, eventReasonPriorityMixed, note)
	}
}

// priorityMemberGone forgets a deleted member and, when the gang's
// priority was its and comes down without it, requeues a remaining member
// so the PodGroup's priority follows.
func (c *Controller) priorityMemberGone(podKey string) {
	gang, p, ok := c.priorities.remove(podKey)
	if !ok || !p.set {
		return
	}
	g := c.priorities.priority(gang)
	if !g.set || g.value >= p.value {
		return
	}
	if k, ok := c.priorities.anyMember(gang, podKey); ok {
		c.queue.Add(k)
	}
}

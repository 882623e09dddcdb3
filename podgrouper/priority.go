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

// memberPriorities remembers the priority of every member this process
// synced, by PodGroup. The label index alone lags: members of a new gang
// are synced concurrently and each writes the PodGroup before its own label
// is in the cache, so a member could lower the priority another one just
// wrote. Each sync records its pod here before computing the gang's
// priority under the PodGroup's lock, so the last computation of a gang
// sees every member synced so far.
type memberPriorities struct {
	mu     sync.Mutex
	gangOf map[string]string                 // pod key → PodGroup key
	byGang map[string]map[string]podPriority // PodGroup key → pod key → priority
}

func newMemberPriorities() *memberPriorities {
	return &memberPriorities{gangOf: map[string]string{}, byGang: map[string]map[string]podPriority{}}
}

// set records pod (key) as a member of gang with priority p.
func (m *memberPriorities) set(pod, gang string, p podPriority) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.removeLocked(pod)
	m.gangOf[pod] = gang
	if m.byGang[gang] == nil {
		m.byGang[gang] = map[string]podPriority{}
	}
	m.byGang[gang][pod] = p
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
	p := m.byGang[gang][pod]
	delete(m.gangOf, pod)
	delete(m.byGang[gang], pod)
	if len(m.byGang[gang]) == 0 {
		delete(m.byGang, gang)
	}
	return gang, p, true
}

// members returns the recorded members of gang.
func (m *memberPriorities) members(gang string) map[string]podPriority {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]podPriority, len(m.byGang[gang]))
	for k, v := range m.byGang[gang] {
		out[k] = v
	}
	return out
}

// gangPriorityOf computes the priority of PodGroup ns/name from its members:
// those this process synced (memberPriorities) and those the pod cache shows
// labelled (after a restart, before every member is synced again).
// Terminating pods still count: they hold their room until they are gone.
func (c *Controller) gangPriorityOf(ns, name string) gangPriority {
	gangKey := ns + "/" + name
	members := c.priorities.members(gangKey)
	if pods, err := c.podIndexer.ByIndex(podGroupIndex, gangKey); err == nil {
		for _, obj := range pods {
			pod, ok := obj.(*corev1.Pod)
			if !ok {
				continue
			}
			key := pod.Namespace + "/" + pod.Name
			if _, seen := members[key]; !seen {
				members[key] = priorityOf(pod)
			}
		}
	}
	list := make([]podPriority, 0, len(members))
	for _, p := range members {
		list = append(list, p)
	}
	return combine(list)
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

// priorityMemberGone requeues a remaining member of a mixed gang whose
// member with the gang's priority went away, so the PodGroup's priority
// comes down to what is left.
func (c *Controller) priorityMemberGone(podKey string) {
	gang, p, ok := c.priorities.remove(podKey)
	if !ok || !p.set {
		return
	}
	ns, name, found := strings.Cut(gang, "/")
	if !found {
		return
	}
	g := c.gangPriorityOf(ns, name)
	if !g.set || g.value >= p.value {
		return
	}
	for k := range c.priorities.members(gang) {
		c.queue.Add(k)
		return
	}
	if pods, err := c.podIndexer.ByIndex(podGroupIndex, gang); err == nil && len(pods) > 0 {
		c.enqueue(pods[0])
	}
}

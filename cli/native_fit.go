package cli

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/muster-io/muster/plugins/gang/plan"
)

// nativeFitGangs are the gangs of the native PodGroups names: each with
// every live pod of the namespace naming it (the members the scheduler's
// GangScheduling plugin counts), the PodGroup's gang minCount, its
// priority (spec.priority: the scheduler refuses a group whose members
// differ from it) and its required topology. The planner and the victim
// search are muster's, which place a gang all or nothing as the in-tree
// plugin does; what differs is said in fit --help.
func nativeFitGangs(f *liveFetch, ns string, names []string) []*fitGang {
	pgs := map[string]*podGroupInfo{}
	for i := range f.nativePodGroups {
		pgs[f.nativePodGroups[i].Name] = nativePodGroupFrom(&f.nativePodGroups[i])
	}
	sort.Strings(names)
	var gangs []*fitGang
	for _, n := range names {
		g := &fitGang{name: n, podGroup: n, key: ns + "/" + n, minMember: 1, native: true}
		g.addMembers(f.pods, func(p *corev1.Pod) bool { return nativeGroupOf(p) == n })
		pg := pgs[n]
		if pg == nil {
			g.blocked, g.blockedVerdict = nativePodGroupNotFound(g.key), verdictNoFit
			gangs = append(gangs, g)
			continue
		}
		g.definition = pg.Definition
		g.minMember = int(pg.MinMember)
		g.recorded, g.recordedClass = pg.Priority, pg.PriorityClass
		// The in-tree plugin knows only a required topology, from the
		// spec (TopologyAwareWorkloadScheduling); muster's annotations
		// are not its.
		if pg.TopologyRequired != "" {
			g.topology = plan.Topology{Key: pg.TopologyRequired, Required: true}
		}
		gangs = append(gangs, g)
	}
	return gangs
}

// nativePodGroupNotFound is fit's reason for a native gang whose PodGroup
// does not exist: the scheduler holds its members (GangScheduling's
// PreEnqueue: "waiting for pods's pod group ... to appear"), with no
// timeout.
func nativePodGroupNotFound(gang string) string {
	return fmt.Sprintf("native PodGroup %s not found: the scheduler holds its members until it exists", gang)
}

// nativeWaitingForMembers is fit's reason for a native gang short of
// minCount members, in GangScheduling's PreEnqueue words.
func nativeWaitingForMembers(gang string, have, minCount int) string {
	return fmt.Sprintf("native PodGroup %s: waiting for minCount pods from a gang to appear in scheduling queue: %d of %d (minCount) exist", gang, have, minCount)
}

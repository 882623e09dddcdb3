package plan

import (
	"encoding/json"
	"sort"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// Shape is a set of pending members that every filter treats alike: same
// requests and same scheduling constraints. The planner evaluates a shape once
// per node instead of once per member.
type Shape struct {
	// Key identifies the shape (a canonical encoding of what filters read).
	Key string
	// Pod is the representative member the filters are asked about.
	Pod *v1.Pod
	// PodInfo is Pod's precomputed info (requests, affinity terms).
	PodInfo fwk.PodInfo
	// Members are the pending pods of this shape, in the order given.
	Members []*v1.Pod
	// Interfering is true when placing one member can change whether
	// another member fits for reasons other than resources: host ports,
	// required pod affinity or anti-affinity, hard topology spread. A gang
	// with such a shape is planned member by member, each judged with the
	// members placed before it (Filter.Session), as the scheduler judges
	// them when it reserves them one after the other.
	Interfering bool

	request vec
}

// shapeKey lists what filters read from a pod. Labels and names are left
// out on purpose: gang members differ in index labels, and grouping them
// apart would defeat the point. A member whose labels matter to another pod's
// anti-affinity is still checked by the real Filter on its planned node in
// its own cycle, so a wrong guess costs a re-plan, never a partial gang.
type shapeKey struct {
	Requests          map[string]int64              `json:"r"`
	NodeName          string                        `json:"n,omitempty"`
	NodeSelector      map[string]string             `json:"ns,omitempty"`
	Affinity          *v1.Affinity                  `json:"a,omitempty"`
	Tolerations       []v1.Toleration               `json:"t,omitempty"`
	TopologySpread    []v1.TopologySpreadConstraint `json:"ts,omitempty"`
	HostPorts         []v1.ContainerPort            `json:"hp,omitempty"`
	Volumes           []v1.Volume                   `json:"v,omitempty"`
	ResourceClaims    []v1.PodResourceClaim         `json:"rc,omitempty"`
	PriorityClassName string                        `json:"pc,omitempty"`
	RuntimeClassName  *string                       `json:"rt,omitempty"`
	Overhead          v1.ResourceList               `json:"o,omitempty"`
	SchedulingGates   []v1.PodSchedulingGate        `json:"g,omitempty"`
	OS                *v1.PodOS                     `json:"os,omitempty"`
	// Pinned is where the pod's allocated claims confine it
	// (Devices.Pinned): claims differ per member, specs do not.
	Pinned string `json:"pin,omitempty"`
}

func keyOf(pod *v1.Pod, res fwk.Resource, pinned string) string {
	k := shapeKey{
		Requests:          map[string]int64{},
		NodeName:          pod.Spec.NodeName,
		NodeSelector:      pod.Spec.NodeSelector,
		Affinity:          pod.Spec.Affinity,
		Tolerations:       pod.Spec.Tolerations,
		TopologySpread:    pod.Spec.TopologySpreadConstraints,
		HostPorts:         hostPorts(pod),
		Volumes:           pod.Spec.Volumes,
		ResourceClaims:    pod.Spec.ResourceClaims,
		PriorityClassName: pod.Spec.PriorityClassName,
		RuntimeClassName:  pod.Spec.RuntimeClassName,
		Overhead:          pod.Spec.Overhead,
		OS:                pod.Spec.OS,
		Pinned:            pinned,
	}
	k.Requests["cpu"] = res.GetMilliCPU()
	k.Requests["memory"] = res.GetMemory()
	k.Requests["ephemeral-storage"] = res.GetEphemeralStorage()
	for n, q := range res.GetScalarResources() {
		k.Requests[string(n)] = q
	}
	// encoding/json sorts map keys, so equal specs give equal keys.
	b, err := json.Marshal(k)
	if err != nil {
		// Every field above is plain data; a failure here means a new field
		// type that cannot be encoded. Fall back to one shape per pod, which
		// is slower but still correct.
		return string(pod.UID)
	}
	return string(b)
}

func hostPorts(pod *v1.Pod) []v1.ContainerPort {
	var ports []v1.ContainerPort
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.HostPort > 0 {
				ports = append(ports, v1.ContainerPort{HostPort: p.HostPort, Protocol: p.Protocol, HostIP: p.HostIP})
			}
		}
	}
	return ports
}

func interfering(pod *v1.Pod) bool {
	if len(hostPorts(pod)) > 0 {
		return true
	}
	if a := pod.Spec.Affinity; a != nil {
		if a.PodAntiAffinity != nil && len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
			return true
		}
		// The first member of a group with required affinity to itself
		// may go anywhere; the others must follow it.
		if a.PodAffinity != nil && len(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
			return true
		}
	}
	for _, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable == v1.DoNotSchedule {
			return true
		}
	}
	return false
}

// GroupShapes groups pods by shape, keeping the first pod of each shape as
// its representative. Shapes come back in a deterministic order.
func GroupShapes(pods []*v1.Pod) []*Shape { return groupShapes(pods, nil) }

// groupShapes is GroupShapes with members whose claims devices pins apart
// in shapes of their own.
func groupShapes(pods []*v1.Pod, devices Devices) []*Shape {
	pin, _ := devices.(Pinner)
	byKey := map[string]*Shape{}
	var shapes []*Shape
	for _, pod := range pods {
		pi, _ := framework.NewPodInfo(pod) // an affinity parse error surfaces in the real Filter
		res := pi.CalculateResource().Resource
		pinned := ""
		if pin != nil {
			pinned = pin.Pinned(pod)
		}
		key := keyOf(pod, res, pinned)
		s, ok := byKey[key]
		if !ok {
			s = &Shape{Key: key, Pod: pod, PodInfo: pi, Interfering: interfering(pod)}
			byKey[key] = s
			shapes = append(shapes, s)
		}
		s.Members = append(s.Members, pod)
	}
	sort.SliceStable(shapes, func(i, j int) bool { return shapes[i].Key < shapes[j].Key })
	return shapes
}

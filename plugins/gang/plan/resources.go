package plan

import (
	"sort"
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	fwk "k8s.io/kube-scheduler/framework"
)

// vec is a resource amount per dimension of a dims table.
type vec []int64

// dims names the resource dimensions the planner tracks for one gang: only
// the resources some member requests matter, so vectors stay short.
type dims struct {
	names []v1.ResourceName
	index map[v1.ResourceName]int
}

func newDims() *dims { return &dims{index: map[v1.ResourceName]int{}} }

func (d *dims) add(name v1.ResourceName) {
	if _, ok := d.index[name]; ok {
		return
	}
	d.index[name] = len(d.names)
	d.names = append(d.names, name)
}

// addRequest registers every resource r requests with a non-zero amount.
func (d *dims) addRequest(r fwk.Resource) {
	if r.GetMilliCPU() > 0 {
		d.add(v1.ResourceCPU)
	}
	if r.GetMemory() > 0 {
		d.add(v1.ResourceMemory)
	}
	if r.GetEphemeralStorage() > 0 {
		d.add(v1.ResourceEphemeralStorage)
	}
	for name, q := range r.GetScalarResources() {
		if q > 0 {
			d.add(name)
		}
	}
}

// sorted orders the dimensions so messages and keys are deterministic.
func (d *dims) sorted() {
	sort.Slice(d.names, func(i, j int) bool { return d.names[i] < d.names[j] })
	for i, n := range d.names {
		d.index[n] = i
	}
}

// Amount is r's quantity of resource name in the scheduler's units
// (millicores for CPU, bytes for memory and ephemeral storage); 0 for a nil r.
func Amount(r fwk.Resource, name v1.ResourceName) int64 {
	if r == nil {
		return 0
	}
	switch name {
	case v1.ResourceCPU:
		return r.GetMilliCPU()
	case v1.ResourceMemory:
		return r.GetMemory()
	case v1.ResourceEphemeralStorage:
		return r.GetEphemeralStorage()
	}
	return r.GetScalarResources()[name]
}

func (d *dims) vector(r fwk.Resource) vec {
	v := make(vec, len(d.names))
	for i, n := range d.names {
		v[i] = Amount(r, n)
	}
	return v
}

// free is allocatable minus requested for every dimension.
func (d *dims) free(ni fwk.NodeInfo) vec {
	v := make(vec, len(d.names))
	d.freeInto(v, ni)
	return v
}

// freeInto is free into v (len(d.names) long).
func (d *dims) freeInto(v vec, ni fwk.NodeInfo) {
	alloc, req := ni.GetAllocatable(), ni.GetRequested()
	for i, n := range d.names {
		v[i] = Amount(alloc, n) - Amount(req, n)
	}
}

func (v vec) sub(o vec) {
	for i := range v {
		v[i] -= o[i]
	}
}

// fitCount is how many pods requesting req fit into free, capped at limit.
// Dimensions the pod does not request never limit it.
func fitCount(free, req vec, limit int) int {
	n := limit
	for i, r := range req {
		if r <= 0 {
			continue
		}
		if free[i] < r {
			return 0
		}
		if c := free[i] / r; c < int64(n) {
			n = int(c)
		}
	}
	return n
}

// format renders an amount of one resource the way kubectl shows it.
func format(name v1.ResourceName, v int64) string {
	switch name {
	case v1.ResourceCPU:
		return resource.NewMilliQuantity(v, resource.DecimalSI).String()
	case v1.ResourceMemory, v1.ResourceEphemeralStorage:
		return resource.NewQuantity(v, resource.BinarySI).String()
	}
	return strconv.FormatInt(v, 10)
}

// FitsResources reports whether every pod fits on ni together by resources
// and pod count alone, with the devices their claims take when devices is
// not nil.
func FitsResources(ni fwk.NodeInfo, pods []fwk.PodInfo, devices Devices) bool {
	if len(pods) == 0 {
		return true
	}
	d := newDims()
	extra := make([]map[v1.ResourceName]int64, len(pods))
	for k, pi := range pods {
		d.addRequest(pi.CalculateResource().Resource)
		if devices != nil {
			extra[k] = devices.Request(pi.GetPod())
			for name := range extra[k] {
				d.add(name)
			}
		}
	}
	free := d.free(ni)
	if devices != nil {
		for i, name := range d.names {
			if f, ok := devices.Free(ni.Node(), name); ok {
				free[i] = f
			}
		}
	}
	for k, pi := range pods {
		free.sub(d.vector(pi.CalculateResource().Resource))
		for name, q := range extra[k] {
			free[d.index[name]] -= q
		}
	}
	for _, v := range free {
		if v < 0 {
			return false
		}
	}
	return ni.GetAllocatable().GetAllowedPodNumber()-len(ni.GetPods()) >= len(pods)
}

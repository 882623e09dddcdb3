// Package devices counts the DRA devices gang members take, so the gang
// planner can add them up like any other resource (plan.Devices).
//
// The DRA Filter plugin judges one pod at a time against the devices
// allocated so far: asked about the members of a gang that are still only
// planned, it says yes on a node for each of them, and the planner stacked
// members whose devices together did not fit. Counting here is by device:
// a claim request of an exact count of devices of one DeviceClass (its
// selectors included) is a dimension, and a node's free amount of it is the
// devices its ResourceSlices publish that match and no claim holds. What
// this package does not count (a request with alternatives, a device
// shared between claims, devices reached from several nodes) the DRA
// Filter still judges on the node as it is, so a wrong count costs a
// re-plan, never a partial gang.
package devices

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
	v1helper "k8s.io/kubernetes/pkg/apis/core/v1/helper"

	"github.com/muster-io/muster/plugins/gang/plan"
)

// maxMatches bounds the cache of selector verdicts (one entry per slice
// and request kind); past it the cache starts over.
const maxMatches = 20000

// maxNameLen bounds a dimension's name, which quotes the request's
// selectors for people.
const maxNameLen = 120

// Counter reads claims, slices and classes through the scheduler's DRA
// manager (the view the DynamicResources plugin has, in-flight allocations
// included). It is safe for concurrent use.
type Counter struct {
	dra fwk.SharedDRAManager
	cel *cel.Cache

	mu sync.Mutex
	// matches[slice key + spec key] says, per device of the slice,
	// whether it matches the spec's class and selectors: CEL is the cost,
	// and slices change rarely.
	matches map[matchKey][]bool
}

// matchKey identifies a slice's verdicts for one kind of request.
type matchKey struct {
	slice, class       types.UID
	sliceGen, classGen int64
	spec               v1.ResourceName
}

// New returns a Counter over dra.
func New(dra fwk.SharedDRAManager) *Counter {
	return &Counter{dra: dra, cel: cel.NewCache(64, cel.Features{}), matches: map[matchKey][]bool{}}
}

// spec is one kind of device request: a class and selectors, for a count
// of devices (All false) or for every matching device of a node.
type spec struct {
	class     string
	selectors []string
	all       bool
	// key is name(), computed once.
	key v1.ResourceName
}

func newSpec(class string, selectors []string, all bool) spec {
	s := spec{class: class, selectors: selectors, all: all}
	s.key = s.name()
	return s
}

func (s spec) name() v1.ResourceName {
	var b strings.Builder
	if s.all {
		b.WriteString("all ")
	}
	b.WriteString("devices of class ")
	b.WriteString(s.class)
	if len(s.selectors) > 0 {
		b.WriteString(" matching ")
		b.WriteString(strings.Join(s.selectors, " && "))
	}
	n := b.String()
	if len(n) > maxNameLen {
		sum := sha256.Sum256([]byte(n))
		n = n[:maxNameLen] + "… #" + hex.EncodeToString(sum[:4])
	}
	return v1.ResourceName(n)
}

// View is the devices as one plan sees them: slices and allocated devices
// are read once, on first need. Make one per plan.
type View struct {
	c *Counter

	mu     sync.Mutex
	specs  map[v1.ResourceName]spec
	loaded bool
	slices []*resourceapi.ResourceSlice
	// byNode are the slices of each node's own devices.
	byNode  map[string][]*resourceapi.ResourceSlice
	classes map[string]*resourceapi.DeviceClass
	taken   sets.Set[structured.DeviceID]
	takenIn map[poolKey]sets.Set[string]
	err     error
}

type poolKey struct{ driver, pool string }

var _ plan.Devices = &View{}

// View starts a view; nil when c is nil (no DRA in this scheduler).
func (c *Counter) View() plan.Devices {
	if c == nil {
		return nil
	}
	return &View{c: c, specs: map[v1.ResourceName]spec{}}
}

// Pending says which of pod's claims the scheduler cannot see yet ("" when
// it sees them all): the ResourceClaim controller makes a pod's claims from
// its templates after the pod, and a gang planned before them is planned
// without their devices.
func (c *Counter) Pending(pod *v1.Pod) string {
	if c == nil {
		return ""
	}
	for i := range pod.Spec.ResourceClaims {
		pc := &pod.Spec.ResourceClaims[i]
		name, _, err := resourceclaim.Name(pod, pc)
		if err != nil {
			return fmt.Sprintf("claim %s of pod %s/%s is not created yet", pc.Name, pod.Namespace, pod.Name)
		}
		if name == nil {
			continue
		}
		if _, err := c.dra.ResourceClaims().Get(pod.Namespace, *name); err != nil {
			return fmt.Sprintf("ResourceClaim %s/%s of pod %s is not known to the scheduler yet", pod.Namespace, *name, pod.Name)
		}
	}
	return ""
}

// Request implements plan.Devices. Claims already allocated (their devices
// are counted as taken) and claims named by the pod rather than made from
// a template (shared with other pods, allocated once) take nothing more.
func (v *View) Request(pod *v1.Pod) map[v1.ResourceName]int64 {
	var out map[v1.ResourceName]int64
	for _, claim := range v.c.ownClaims(pod) {
		if claim.Status.Allocation != nil {
			continue
		}
		for _, r := range claim.Spec.Devices.Requests {
			e := r.Exactly
			if e == nil || e.AdminAccess != nil && *e.AdminAccess {
				continue
			}
			s := newSpec(e.DeviceClassName, selectorsOf(e.Selectors), e.AllocationMode == resourceapi.DeviceAllocationModeAll)
			count := e.Count
			if s.all {
				count = 1
			} else if count == 0 {
				count = 1
			}
			dim := s.key
			v.mu.Lock()
			v.specs[dim] = s
			v.mu.Unlock()
			if out == nil {
				out = map[v1.ResourceName]int64{}
			}
			out[dim] += count
		}
	}
	return out
}

// Free implements plan.Devices.
func (v *View) Free(node *v1.Node, name v1.ResourceName) (int64, bool) {
	if node == nil {
		return 0, false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	s, ok := v.specs[name]
	if !ok {
		class := v.c.backing(node, name)
		if class == nil {
			return 0, false
		}
		// Not kept in specs: on the next node the allocatable may carry
		// the resource.
		s = newSpec(class.Name, nil, false)
	}
	// The planner asks once per node and dimension: nothing to keep.
	return v.count(s, node.Name), true
}

// count is the free amount of s on node. Call with v.mu held.
func (v *View) count(s spec, node string) int64 {
	v.load()
	if v.err != nil {
		// Unknown devices count as none: the gang waits rather than
		// being planned onto devices that may be taken.
		return 0
	}
	class, err := v.class(s.class)
	if err != nil {
		return 0
	}
	var free, total int64
	for _, sl := range v.byNode[node] {
		match := v.c.match(sl, class, s)
		taken := v.takenIn[poolKey{sl.Spec.Driver, sl.Spec.Pool.Name}]
		for k, d := range sl.Spec.Devices {
			if !match[k] {
				continue
			}
			total++
			if !taken.Has(d.Name) {
				free++
			}
		}
	}
	if s.all {
		// Every matching device of the node, or none of it.
		if total > 0 && free == total {
			return 1
		}
		return 0
	}
	return free
}

// class is the DeviceClass name, read once per view. Call with v.mu held.
func (v *View) class(name string) (*resourceapi.DeviceClass, error) {
	if c, ok := v.classes[name]; ok {
		return c, nil
	}
	c, err := v.c.dra.DeviceClasses().Get(name)
	if err != nil {
		return nil, err
	}
	if v.classes == nil {
		v.classes = map[string]*resourceapi.DeviceClass{}
	}
	v.classes[name] = c
	return c, nil
}

// load reads the slices and the allocated devices once. Call with v.mu
// held.
func (v *View) load() {
	if v.loaded {
		return
	}
	v.loaded = true
	v.slices, v.err = v.c.dra.ResourceSlices().ListWithDeviceTaintRules()
	if v.err == nil {
		v.taken, v.err = v.c.dra.ResourceClaims().ListAllAllocatedDevices()
	}
	// Taken devices by pool: most pools have none, and interning a
	// device ID for every device of every node on every plan showed in
	// the profile.
	v.takenIn = map[poolKey]sets.Set[string]{}
	for id := range v.taken {
		k := poolKey{id.Driver.String(), id.Pool.String()}
		if v.takenIn[k] == nil {
			v.takenIn[k] = sets.New[string]()
		}
		v.takenIn[k].Insert(id.Device.String())
	}
	v.byNode = map[string][]*resourceapi.ResourceSlice{}
	for _, sl := range v.slices {
		if n := sl.Spec.NodeName; n != nil && *n != "" {
			v.byNode[*n] = append(v.byNode[*n], sl)
		}
	}
}

// match says, per device of sl, whether it is of class and matches s's
// selectors.
func (c *Counter) match(sl *resourceapi.ResourceSlice, class *resourceapi.DeviceClass, s spec) []bool {
	key := matchKey{slice: sl.UID, sliceGen: sl.Generation, class: class.UID, classGen: class.Generation, spec: s.key}
	c.mu.Lock()
	m, ok := c.matches[key]
	c.mu.Unlock()
	if ok {
		return m
	}
	var exprs []string
	for _, sel := range class.Spec.Selectors {
		if sel.CEL != nil {
			exprs = append(exprs, sel.CEL.Expression)
		}
	}
	exprs = append(exprs, s.selectors...)
	m = make([]bool, len(sl.Spec.Devices))
	ctx := context.Background()
	for k, d := range sl.Spec.Devices {
		m[k] = c.matches1(ctx, exprs, cel.Device{Driver: sl.Spec.Driver, Attributes: d.Attributes, Capacity: d.Capacity})
	}
	c.mu.Lock()
	if len(c.matches) >= maxMatches {
		c.matches = map[matchKey][]bool{}
	}
	c.matches[key] = m
	c.mu.Unlock()
	return m
}

// matches1 is true when every expression accepts d; an expression that
// does not compile or fails accepts nothing (the DRA Filter reports it).
func (c *Counter) matches1(ctx context.Context, exprs []string, d cel.Device) bool {
	for _, e := range exprs {
		r := c.cel.GetOrCompile(e)
		if r.Error != nil {
			return false
		}
		ok, _, err := r.DeviceMatches(ctx, d)
		if err != nil || !ok {
			return false
		}
	}
	return true
}

var _ plan.SharedDevices = &View{}

// Domains implements plan.SharedDevices for the first claim pod names that
// is not allocated yet: each group of free devices that reach the same
// nodes and are enough for the claim's first request is a domain. Further
// requests and claims are left to the DRA Filter.
func (v *View) Domains(pod *v1.Pod) []plan.Domain {
	for i := range pod.Spec.ResourceClaims {
		name := pod.Spec.ResourceClaims[i].ResourceClaimName
		if name == nil {
			continue
		}
		claim, err := v.c.dra.ResourceClaims().Get(pod.Namespace, *name)
		if err != nil || claim.Status.Allocation != nil {
			continue
		}
		for _, r := range claim.Spec.Devices.Requests {
			if e := r.Exactly; e != nil && e.AllocationMode != resourceapi.DeviceAllocationModeAll {
				return v.domains(newSpec(e.DeviceClassName, selectorsOf(e.Selectors), false), max(e.Count, 1))
			}
		}
	}
	return nil
}

func selectorsOf(sels []resourceapi.DeviceSelector) []string {
	var out []string
	for _, sel := range sels {
		if sel.CEL != nil {
			out = append(out, sel.CEL.Expression)
		}
	}
	return out
}

// domains groups the free devices of s by the nodes they reach and keeps
// the groups of at least count.
func (v *View) domains(s spec, count int64) []plan.Domain {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := []plan.Domain{}
	v.load()
	if v.err != nil {
		return out
	}
	class, err := v.class(s.class)
	if err != nil {
		return out
	}
	type group struct {
		name  string
		reach func(*v1.Node) bool
		n     int64
	}
	groups := map[string]*group{}
	var order []string
	for _, sl := range v.slices {
		match := v.c.match(sl, class, s)
		for k, d := range sl.Spec.Devices {
			if !match[k] || v.taken.Has(structured.MakeDeviceID(sl.Spec.Driver, sl.Spec.Pool.Name, d.Name)) {
				continue
			}
			key, reach := reachOf(sl, &d)
			if reach == nil {
				continue
			}
			g, ok := groups[key]
			if !ok {
				g = &group{name: sl.Spec.Pool.Name, reach: reach}
				groups[key] = g
				order = append(order, key)
			}
			g.n++
		}
	}
	for _, key := range order {
		if g := groups[key]; g.n >= count {
			out = append(out, plan.Domain{Name: g.name, Reaches: g.reach})
		}
	}
	return out
}

// reachOf is the nodes a device of sl reaches, and a key equal for devices
// reaching the same ones; nil when it reaches none this package can tell.
func reachOf(sl *resourceapi.ResourceSlice, d *resourceapi.Device) (string, func(*v1.Node) bool) {
	nodeName, sel, all := sl.Spec.NodeName, sl.Spec.NodeSelector, sl.Spec.AllNodes
	key := "slice/" + sl.Name
	if sl.Spec.PerDeviceNodeSelection != nil && *sl.Spec.PerDeviceNodeSelection {
		nodeName, sel, all = d.NodeName, d.NodeSelector, d.AllNodes
		key += "/" + d.Name
	}
	switch {
	case nodeName != nil:
		n := *nodeName
		return "node/" + n, func(node *v1.Node) bool { return node.Name == n }
	case all != nil && *all:
		return "all", func(*v1.Node) bool { return true }
	case sel != nil:
		ns, err := nodeaffinity.NewNodeSelector(sel)
		if err != nil {
			return "", nil
		}
		return key, ns.Match
	}
	return "", nil
}

var _ plan.Pinner = &View{}

// Pinned implements plan.Pinner: the node selectors of pod's own allocated
// claims (a claim allocated for a member whose binding failed stays
// allocated on its node).
func (v *View) Pinned(pod *v1.Pod) string {
	var b strings.Builder
	for _, claim := range v.c.ownClaims(pod) {
		if claim.Status.Allocation != nil {
			fmt.Fprintf(&b, "%s=%v;", claim.Name, claim.Status.Allocation.NodeSelector)
		}
	}
	return b.String()
}

// ownClaims are the claims made for pod from its templates that the
// scheduler knows.
func (c *Counter) ownClaims(pod *v1.Pod) []*resourceapi.ResourceClaim {
	var out []*resourceapi.ResourceClaim
	for i := range pod.Spec.ResourceClaims {
		pc := &pod.Spec.ResourceClaims[i]
		if pc.ResourceClaimName != nil {
			continue
		}
		name, _, err := resourceclaim.Name(pod, pc)
		if err != nil || name == nil {
			continue
		}
		if claim, err := c.dra.ResourceClaims().Get(pod.Namespace, *name); err == nil {
			out = append(out, claim)
		}
	}
	return out
}

// Lenient is a plan.Devices for a quick check by resources alone (a stored
// plan still fitting its node): it asks for no devices and finds every
// resource it would count plentiful. Reading claims and slices for each
// member's cycle cost more than the whole plan; the DynamicResources Filter
// judges the devices in that cycle anyway. It keeps a DRA-backed extended
// resource, which the node's allocatable lacks, from failing the check.
func (c *Counter) Lenient() plan.Devices {
	if c == nil {
		return nil
	}
	return lenient{c}
}

type lenient struct{ c *Counter }

func (lenient) Request(*v1.Pod) map[v1.ResourceName]int64 { return nil }

func (l lenient) Free(node *v1.Node, name v1.ResourceName) (int64, bool) {
	if node == nil || l.c.backing(node, name) == nil {
		return 0, false
	}
	return math.MaxInt32, true
}

// backing is the DeviceClass that gives node the extended resource name
// as devices (a DRA-backed extended resource): nil when name is no
// extended resource, the node's allocatable carries it, or no class maps
// it.
func (c *Counter) backing(node *v1.Node, name v1.ResourceName) *resourceapi.DeviceClass {
	if !v1helper.IsExtendedResourceName(name) {
		return nil
	}
	if _, has := node.Status.Allocatable[name]; has {
		return nil
	}
	return c.dra.DeviceClassResolver().GetDeviceClass(name)
}

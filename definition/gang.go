package definition

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/definition/jq"
)

// rootPlan is what the gang definitions yield on one root object. It is
// immutable once built, so the cache may hand it to concurrent callers.
type rootPlan struct {
	off               bool
	minMember         int32 // annotation override; 0 when unset
	topologyRequired  string
	topologyPreferred string
	v                 *view
	gangs             []gangSizes // index-aligned with Compiled.gangs
	// err is why the plan could not be built. A failed plan is cached like
	// a good one: every pod of a workload meets the same error, and a
	// hostile expression re-run for each of them would starve the grouping
	// of every other kind.
	err error
}

type gangSizes struct {
	whole gangSize
	// byScope is per instance of the scope component (grouped gangs).
	byScope []gangSize
}

type gangSize struct {
	minMember    int64
	minResources corev1.ResourceList
	// instances is the number of gang instances the size applies to.
	instances int64
}

// planCache keeps the plans of recently seen root objects. A root object is
// identified by UID and resourceVersion, which the API server changes on
// every write, so a hit is the same object; objects without them (offline
// files, tests) are never cached. The pod-grouper asks about every pod of a
// workload in turn, so most calls hit.
type planCache struct {
	mu sync.Mutex
	m  map[planKey]*rootPlan
}

// planKey is a root object's UID and resourceVersion; the zero key means
// the object cannot be cached.
type planKey struct{ uid, rv, refs string }

const planCacheSize = 256

func (pc *planCache) get(key planKey) *rootPlan {
	if key == (planKey{}) {
		return nil
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return pc.m[key]
}

func (pc *planCache) put(key planKey, p *rootPlan) {
	if key == (planKey{}) {
		return
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.m == nil {
		pc.m = map[planKey]*rootPlan{}
	}
	if len(pc.m) >= planCacheSize {
		for k := range pc.m { // evict an arbitrary entry
			delete(pc.m, k)
			break
		}
	}
	pc.m[key] = p
}

func cacheKey(obj *unstructured.Unstructured) planKey {
	uid, rv := string(obj.GetUID()), obj.GetResourceVersion()
	if uid == "" || rv == "" {
		return planKey{}
	}
	return planKey{uid: uid, rv: rv}
}

// plan returns the gang sizes of root, from the cache when it can.
func (c *Compiled) plan(ctx context.Context, root *unstructured.Unstructured) (*rootPlan, error) {
	key := cacheKey(root)
	// The objects bound to the references are part of what the plan
	// depends on.
	if refs, ok := c.refsKey(ctx); !ok {
		key = planKey{}
	} else if key != (planKey{}) {
		key.refs = refs
	}
	if p := c.cache.get(key); p != nil {
		return p, p.err
	}
	p, err := c.buildPlan(ctx, root)
	if err != nil {
		// Only answers that depend on the object alone are kept: not a
		// caller that gave up, nor a deadline a busy machine missed.
		if ctx.Err() == nil && !errors.Is(err, ErrTimeout) {
			c.cache.put(key, &rootPlan{err: err})
		}
		return nil, err
	}
	c.cache.put(key, p)
	return p, nil
}

// overrides reads the workload annotations that change gangs.
func overrides(root *unstructured.Unstructured, p *rootPlan) error {
	ann := root.GetAnnotations()
	// "none" is the pod-grouper's own marker on a pod, not a workload's
	// choice; a bare Pod is its own workload and carries it once grouped.
	if v, ok := ann[api.AnnotationGang]; ok && v != api.GangNone {
		if v != api.GangOff {
			return &AnnotationError{Key: api.AnnotationGang, Value: v, Want: fmt.Sprintf("the only value is %q (opt out of gang scheduling)", api.GangOff)}
		}
		p.off = true
	}
	if v, ok := ann[api.AnnotationMinMember]; ok {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		if err != nil || n <= 0 || n > MaxCount {
			return &AnnotationError{Key: api.AnnotationMinMember, Value: v, Want: fmt.Sprintf("must be a whole number from 1 to %d", MaxCount)}
		}
		p.minMember = int32(n)
	}
	for _, a := range []struct {
		key string
		dst *string
	}{{api.AnnotationTopologyRequired, &p.topologyRequired}, {api.AnnotationTopologyPreferred, &p.topologyPreferred}} {
		v, ok := ann[a.key]
		if !ok {
			continue
		}
		if msgs := validation.IsQualifiedName(v); len(msgs) > 0 {
			return &AnnotationError{Key: a.key, Value: v, Want: "must be a node label key: " + msgs[0]}
		}
		*a.dst = v
	}
	return nil
}

// gangsOf returns the gang definitions that apply to root: the
// definition's, or, for a definition without any, the whole-workload
// override gang when root sets muster.io/min-member.
func (c *Compiled) gangsOf(root *unstructured.Unstructured) []*gangDef {
	if len(c.gangs) > 0 {
		return c.gangs
	}
	if _, ok := root.GetAnnotations()[api.AnnotationMinMember]; ok && c.overrideGang != nil {
		return []*gangDef{c.overrideGang}
	}
	return nil
}

func (c *Compiled) buildPlan(ctx context.Context, root *unstructured.Unstructured) (*rootPlan, error) {
	p := &rootPlan{}
	if err := overrides(root, p); err != nil {
		return nil, err
	}
	gangs := c.gangsOf(root)
	if p.off || len(gangs) == 0 {
		return p, nil
	}
	in := jq.Value(root.Object)
	if err := c.topologyFromPaths(ctx, in, p); err != nil {
		return nil, err
	}
	v, err := c.extract(ctx, in)
	if err != nil {
		return nil, err
	}
	p.v = v
	for _, g := range gangs {
		gs, err := c.gangSizes(v, g)
		if err != nil {
			return nil, err
		}
		p.gangs = append(p.gangs, gs)
	}
	return p, nil
}

// requests returns the PodRequests of each instance template of ci,
// computing them once per view.
func (v *view) requests(ci int) []corev1.ResourceList {
	vc := &v.comps[ci]
	if vc.req == nil {
		vc.req = make([]corev1.ResourceList, len(vc.tpl))
		for j, t := range vc.tpl {
			vc.req[j] = PodRequests(&t.Spec)
		}
	}
	return vc.req
}

func minReplicas(vc *viewComp, j int) int64 {
	if vc.min[j] != nil {
		return int64(*vc.min[j])
	}
	return int64(vc.replicas[j])
}

// gangSizes computes a gang definition's min-member and min-resources on a
// view: once for a whole-workload gang, once per scope instance for a
// grouped one. Counts are totals over the whole workload (see the package
// documentation, "Gangs"), so a grouped gang divides them by its number of
// gang instances.
func (c *Compiled) gangSizes(v *view, g *gangDef) (gangSizes, error) {
	var gs gangSizes
	if !g.grouped {
		gs.whole = gangSize{minResources: corev1.ResourceList{}, instances: 1}
		for _, ci := range g.counted {
			req := v.requests(ci)
			for j, n := range v.comps[ci].minPods {
				gs.whole.minMember += n
				addScaled(gs.whole.minResources, req[j], n)
			}
		}
		return gs, nil
	}
	sc := &v.comps[g.scope]
	gs.byScope = make([]gangSize, len(sc.ids))
	// totals[s] is the min-pods of the counted components below scope
	// instance s, before dividing.
	totals := make([]int64, len(sc.ids))
	for _, ci := range g.counted {
		for j, n := range v.comps[ci].minPods {
			s, err := c.scopeOf(v, ci, j, g.scope)
			if err != nil {
				return gs, err
			}
			totals[s] += n
		}
	}
	for s := range gs.byScope {
		gs.byScope[s] = gangSize{minResources: corev1.ResourceList{}, instances: max(int64(sc.replicas[s]), 1)}
	}
	if g.sizeMember >= 0 {
		// The member's own count is the size of one gang instance, so the
		// totals hold that many pods per instance.
		mv := &v.comps[g.sizeMember]
		for j := range mv.ids {
			s, err := c.scopeOf(v, g.sizeMember, j, g.scope)
			if err != nil {
				return gs, err
			}
			if m := minReplicas(mv, j); m > 0 {
				gs.byScope[s].instances = max(ceilDiv(totals[s], m), 1)
			}
		}
	}
	for _, ci := range g.counted {
		req := v.requests(ci)
		for j, n := range v.comps[ci].minPods {
			s, err := c.scopeOf(v, ci, j, g.scope)
			if err != nil {
				return gs, err
			}
			// Rounded up: a count that does not divide evenly never
			// loosens a gang.
			per := ceilDiv(n, gs.byScope[s].instances)
			gs.byScope[s].minMember += per
			addScaled(gs.byScope[s].minResources, req[j], per)
		}
	}
	return gs, nil
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// scopeOf walks from instance j of component ci up to the scope component
// and returns the scope instance it belongs to.
func (c *Compiled) scopeOf(v *view, ci, j, scope int) (int, error) {
	for ci != scope {
		p := c.comps[ci].parent
		if p < 0 {
			return 0, fmt.Errorf("component %q is not below the gang scope %q", c.comps[ci].name, c.comps[scope].name)
		}
		j = v.comps[ci].parent[j]
		ci = p
	}
	return j, nil
}

// GangForPod returns the gang instance pod belongs to in workload root, with
// min-member and min-resources and the workload's annotation overrides
// applied. It returns (nil, nil) when the pod is in no gang: the definition
// has no gang instruction, the workload opted out, or the pod is not a member.
// A pod that matches no component gives an error wrapping ErrNoComponent.
// The rules are in the package documentation ("Gangs").
func (c *Compiled) GangForPod(ctx context.Context, root *unstructured.Unstructured, pod *corev1.Pod) (*Gang, error) {
	// The annotations are read first: an invalid value must stop the pod
	// even on a kind whose definition has no gang, or muster.io/gang: on
	// would schedule the pods alone without a word.
	if err := overrides(root, &rootPlan{}); err != nil {
		return nil, err
	}
	gangs := c.gangsOf(root)
	if len(gangs) == 0 || root.GetAnnotations()[api.AnnotationGang] == api.GangOff {
		return nil, nil
	}
	pm, ci, match, err := c.matchPodMemo(ctx, pod)
	if err != nil {
		return nil, err
	}
	gi, md, err := c.gangOf(ctx, gangs, pod, ci, pm)
	if err != nil || md == nil {
		return nil, err
	}
	g := gangs[gi]
	gang := &Gang{Definition: g.name, Members: append([]string(nil), g.memberNames...),
		TopologyRequired: g.topologyRequired, TopologyPreferred: g.topologyPreferred}
	for _, e := range md.groupBy {
		vals, err := c.evalPod(ctx, e, pm)
		if err != nil {
			return nil, podErr(pod, c.comps[md.comp], err)
		}
		if len(vals) != 1 {
			return nil, podErr(pod, c.comps[md.comp], &EvalError{Field: e.field, Expression: e.src,
				Err: fmt.Errorf("yields %d values; a group key must yield exactly one non-empty value", len(vals))})
		}
		key, err := scalarString(vals[0])
		if err != nil {
			return nil, podErr(pod, c.comps[md.comp], &EvalError{Field: e.field, Expression: e.src,
				Err: fmt.Errorf("a group key must be one non-empty value: %w", err)})
		}
		gang.Keys = append(gang.Keys, key)
	}

	p, err := c.plan(ctx, root)
	if err != nil {
		return nil, err
	}
	if p.off {
		return nil, nil
	}
	size := p.gangs[gi].whole
	if g.grouped {
		vc := &p.v.comps[ci]
		j, ok := vc.instance(match.Instance)
		if !ok {
			return nil, fmt.Errorf("pod %s/%s: component %q has no instance %q in %s %s/%s (it has %d)",
				pod.Namespace, pod.Name, match.Component, match.Instance, root.GetKind(), root.GetNamespace(), root.GetName(), len(vc.ids))
		}
		s, err := c.scopeOf(p.v, ci, j, g.scope)
		if err != nil {
			return nil, err
		}
		size = p.gangs[gi].byScope[s]
	}
	if err := fill(gang, size, p); err != nil {
		return nil, fmt.Errorf("gang %q of %s %s/%s: %w", g.name, root.GetKind(), root.GetNamespace(), root.GetName(), err)
	}
	return gang, nil
}

// fill sets the sizes of a gang with the workload overrides applied. An
// override below the definition's min-member scales min-resources down in
// proportion (rounded up per resource); one at or above it keeps the
// definition's min-resources, since the extra pods' size is unknown.
func fill(g *Gang, size gangSize, p *rootPlan) error {
	if size.minMember > MaxCount {
		return fmt.Errorf("the gang's min-member %d is above the ceiling of %d", size.minMember, MaxCount)
	}
	g.MinMember = int32(size.minMember)
	// Shared, not copied: this runs once per pod, and a copy per call cost
	// a fifth of GangForPod (see Gang.MinResources).
	g.MinResources = size.minResources
	if p.minMember > 0 {
		g.Overridden = true
		if int64(p.minMember) < size.minMember {
			g.MinResources = size.minResources.DeepCopy()
			for name, q := range g.MinResources {
				g.MinResources[name] = scaleQuantity(q, int64(p.minMember), size.minMember, name != corev1.ResourceCPU)
			}
		}
		g.MinMember = p.minMember
	}
	if p.topologyRequired != "" {
		g.TopologyRequired = p.topologyRequired
	}
	if p.topologyPreferred != "" {
		g.TopologyPreferred = p.topologyPreferred
	}
	return nil
}

// gangOf finds the gang definition of a pod of component ci: the first
// definition with a member that is ci or an ancestor of it and whose filters
// all hold on the pod. Within a definition the member closest to ci wins.
func (c *Compiled) gangOf(ctx context.Context, gangs []*gangDef, pod *corev1.Pod, ci int, pm *podInput) (int, *memberDef, error) {
	for gi, g := range gangs {
		var best *memberDef
		for mi := range g.members {
			m := &g.members[mi]
			if !c.isAncestorOrSelf(m.comp, ci) {
				continue
			}
			if best != nil && c.comps[best.comp].depth >= c.comps[m.comp].depth {
				continue
			}
			ok, err := c.filtersHold(ctx, m, pm)
			if err != nil {
				return 0, nil, podErr(pod, c.comps[m.comp], err)
			}
			if ok {
				best = m
			}
		}
		if best != nil {
			return gi, best, nil
		}
	}
	return 0, nil, nil
}

// filtersHold is true when every filter yields at least one value and all
// its values are true.
func (c *Compiled) filtersHold(ctx context.Context, m *memberDef, pm *podInput) (bool, error) {
	for _, f := range m.filters {
		vals, err := c.evalPod(ctx, f, pm)
		if err != nil {
			return false, err
		}
		if len(vals) == 0 {
			return false, nil
		}
		for _, x := range vals {
			if x != true {
				return false, nil
			}
		}
	}
	return true, nil
}

// GangPlans returns what each gang definition yields on root, without pods:
// one plan per whole-workload gang (Instances 1) and, for a grouped gang,
// one plan covering every replica of the scope component (Instances is the
// number of scope replicas in the workload). When the scope component has
// several instances of different sizes, there is one plan per such instance.
// Workload overrides apply; an opted-out workload has no plans.
func (c *Compiled) GangPlans(ctx context.Context, root *unstructured.Unstructured) ([]GangPlan, error) {
	p, err := c.plan(ctx, root)
	if err != nil {
		return nil, err
	}
	if p.off {
		return nil, nil
	}
	var out []GangPlan
	for gi, g := range c.gangsOf(root) {
		mk := func(size gangSize) (GangPlan, error) {
			instances := size.instances
			var gang Gang
			gang.TopologyRequired, gang.TopologyPreferred = g.topologyRequired, g.topologyPreferred
			if err := fill(&gang, size, p); err != nil {
				return GangPlan{}, fmt.Errorf("gang %q: %w", g.name, err)
			}
			return GangPlan{Definition: g.name, Members: append([]string(nil), g.memberNames...), Instances: int(instances),
				MinMember: gang.MinMember, MinResources: gang.MinResources,
				TopologyRequired: gang.TopologyRequired, TopologyPreferred: gang.TopologyPreferred}, nil
		}
		if !g.grouped {
			gp, err := mk(p.gangs[gi].whole)
			if err != nil {
				return nil, err
			}
			out = append(out, gp)
			continue
		}
		var last *GangPlan
		for _, size := range p.gangs[gi].byScope {
			gp, err := mk(size)
			if err != nil {
				return nil, err
			}
			if last != nil && last.MinMember == gp.MinMember && equality.Semantic.DeepEqual(last.MinResources, gp.MinResources) {
				last.Instances += gp.Instances
				continue
			}
			out = append(out, gp)
			last = &out[len(out)-1]
		}
	}
	return out, nil
}

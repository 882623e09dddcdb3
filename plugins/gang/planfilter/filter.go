package planfilter

import (
	"context"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/muster-io/muster/plugins/gang/plan"
)

// Runner runs a profile's PreFilter and Filter plugins and their
// extensions; framework.Framework implements it.
type Runner interface {
	RunPreFilterPlugins(ctx context.Context, state fwk.CycleState, pod *v1.Pod) (*fwk.PreFilterResult, *fwk.Status, sets.Set[string])
	RunPreFilterExtensionAddPod(ctx context.Context, state fwk.CycleState, podToSchedule *v1.Pod, podInfoToAdd fwk.PodInfo, nodeInfo fwk.NodeInfo) *fwk.Status
	RunPreFilterExtensionRemovePod(ctx context.Context, state fwk.CycleState, podToSchedule *v1.Pod, podInfoToRemove fwk.PodInfo, nodeInfo fwk.NodeInfo) *fwk.Status
	RunFilterPlugins(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status
}

// Filter is a plan.Filter that asks a Runner. Make one per plan: the
// PreFilter results it keeps per shape hold for the snapshot it was made
// on. It is safe for concurrent use.
type Filter struct {
	runner Runner
	// prepare marks each cycle state the filter makes (the gang plugin
	// steps aside in its own PreFilter when it sees its mark).
	prepare func(fwk.CycleState)
	// removed are pods the runner's snapshot still has and the plan
	// treats as gone.
	removed []plan.PodOnNode

	mu     sync.Mutex
	shapes map[*plan.Shape]*shapeState
}

var (
	_ plan.Filter  = &Filter{}
	_ plan.Remover = &Filter{}
)

// shapeState is what the PreFilter plugins said about a shape's
// representative member.
type shapeState struct {
	once  sync.Once
	state fwk.CycleState
	// allowed restricts the nodes (a PreFilterResult); nil: every node.
	allowed sets.Set[string]
	ok      bool
}

// New returns a Filter over r. prepare, when not nil, is called on every
// cycle state before the PreFilter plugins run.
func New(r Runner, prepare func(fwk.CycleState)) *Filter {
	return &Filter{runner: r, prepare: prepare, shapes: map[*plan.Shape]*shapeState{}}
}

// Without implements plan.Remover: the PreFilter state of each shape then
// forgets the removed pods through the PreFilter extensions, as
// kube-scheduler's preemption does for its victims.
func (f *Filter) Without(removed []plan.PodOnNode) plan.Filter {
	g := New(f.runner, f.prepare)
	g.removed = append(append([]plan.PodOnNode(nil), f.removed...), removed...)
	return g
}

func (f *Filter) shape(ctx context.Context, s *plan.Shape) *shapeState {
	f.mu.Lock()
	st, ok := f.shapes[s]
	if !ok {
		st = &shapeState{}
		f.shapes[s] = st
	}
	f.mu.Unlock()
	st.once.Do(func() {
		cs := framework.NewCycleState()
		if f.prepare != nil {
			f.prepare(cs)
		}
		res, status, _ := f.runner.RunPreFilterPlugins(ctx, cs, s.Pod)
		st.state, st.ok = cs, status.IsSuccess()
		if !res.AllNodes() {
			st.allowed = res.NodeNames
		}
		for _, r := range f.removed {
			if !st.ok {
				break
			}
			st.ok = f.runner.RunPreFilterExtensionRemovePod(ctx, cs, s.Pod, r.Pod, r.Node).IsSuccess()
		}
		if !st.ok {
			klog.FromContext(ctx).V(4).Info("Shape rejected by PreFilter", "pod", klog.KObj(s.Pod), "status", status)
		}
	})
	return st
}

// Check implements plan.Filter.
func (f *Filter) Check(ctx context.Context, s *plan.Shape, ni fwk.NodeInfo) bool {
	st := f.shape(ctx, s)
	return st.admits(ni) && f.runner.RunFilterPlugins(ctx, st.state, s.Pod, ni).IsSuccess()
}

func (st *shapeState) admits(ni fwk.NodeInfo) bool {
	return st.ok && (st.allowed == nil || st.allowed.Has(ni.Node().Name))
}

// Session implements plan.Filter.
func (f *Filter) Session(context.Context) plan.Session {
	return &session{f: f, shapes: map[*plan.Shape]*sessionShape{}}
}

// session judges the members of one placement attempt with the members
// placed before them added to each shape's PreFilter state.
type session struct {
	f      *Filter
	placed []plan.PodOnNode

	mu     sync.Mutex
	shapes map[*plan.Shape]*sessionShape
}

// sessionShape is a shape's PreFilter state with placed[:added] added.
type sessionShape struct {
	state   fwk.CycleState
	allowed sets.Set[string]
	ok      bool
	added   int
}

// Fits implements plan.Session. The first call after a Place brings the
// shape's state up to date under the lock; the calls of one batch then
// only read it, as the framework's own parallel Filter calls do.
func (s *session) Fits(ctx context.Context, sh *plan.Shape, ni fwk.NodeInfo) bool {
	st := s.shape(ctx, sh)
	return st.ok && (st.allowed == nil || st.allowed.Has(ni.Node().Name)) &&
		s.f.runner.RunFilterPlugins(ctx, st.state, sh.Pod, ni).IsSuccess()
}

func (s *session) shape(ctx context.Context, sh *plan.Shape) *sessionShape {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.shapes[sh]
	if !ok {
		base := s.f.shape(ctx, sh)
		st = &sessionShape{allowed: base.allowed, ok: base.ok}
		if st.ok {
			st.state = base.state.Clone()
		}
		s.shapes[sh] = st
	}
	for ; st.ok && st.added < len(s.placed); st.added++ {
		p := s.placed[st.added]
		st.ok = s.f.runner.RunPreFilterExtensionAddPod(ctx, st.state, sh.Pod, p.Pod, p.Node).IsSuccess()
	}
	return st
}

// Place implements plan.Session.
func (s *session) Place(_ context.Context, _ *plan.Shape, pi fwk.PodInfo, ni fwk.NodeInfo) {
	s.placed = append(s.placed, plan.PodOnNode{Pod: pi, Node: ni})
}

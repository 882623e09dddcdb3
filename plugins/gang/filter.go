package gang

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/muster-io/muster/plugins/gang/plan"
)

// profileFilter asks the profile's PreFilter and Filter plugins about a
// shape's representative pod, once per shape (PreFilter) and once per node
// (Filter).
type profileFilter struct {
	p      *Plugin
	mu     sync.Mutex
	states map[*plan.Shape]*shapeState
}

type shapeState struct {
	once    sync.Once
	state   fwk.CycleState
	allowed sets.Set[string] // nil: every node
	ok      bool
}

func (f *profileFilter) shape(ctx context.Context, s *plan.Shape) *shapeState {
	f.mu.Lock()
	st, ok := f.states[s]
	if !ok {
		st = &shapeState{}
		f.states[s] = st
	}
	f.mu.Unlock()
	st.once.Do(func() {
		cs := framework.NewCycleState()
		cs.Write(simKey, simMarker{})
		res, status, _ := f.p.runner.RunPreFilterPlugins(ctx, cs, s.Pod)
		st.state = cs
		st.ok = status.IsSuccess()
		if !res.AllNodes() {
			st.allowed = res.NodeNames
		}
		if !st.ok {
			klog.FromContext(ctx).V(4).Info("Shape rejected by PreFilter", "pod", klog.KObj(s.Pod), "status", status)
		}
	})
	return st
}

// Check implements plan.Filter.
func (f *profileFilter) Check(ctx context.Context, s *plan.Shape, ni fwk.NodeInfo, added []fwk.PodInfo) bool {
	st := f.shape(ctx, s)
	if !st.ok {
		return false
	}
	if st.allowed != nil && !st.allowed.Has(ni.Node().Name) {
		return false
	}
	state := st.state
	if len(added) > 0 {
		state = st.state.Clone()
		for _, pi := range added {
			if !f.p.h.RunPreFilterExtensionAddPod(ctx, state, s.Pod, pi, ni).IsSuccess() {
				return false
			}
		}
	}
	return f.p.h.RunFilterPlugins(ctx, state, s.Pod, ni).IsSuccess()
}

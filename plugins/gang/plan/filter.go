package plan

import (
	"context"

	fwk "k8s.io/kube-scheduler/framework"
)

// Filter brings the verdict of the scheduler profile's other Filter plugins
// into the planner. plugins/gang/planfilter implements it over a real
// framework; the planner never sees one.
type Filter interface {
	// Check reports whether a member of shape s passes every filter on ni
	// as the snapshot is: without any member of the plan being made. The
	// planner may call it from several goroutines at once.
	Check(ctx context.Context, s *Shape, ni fwk.NodeInfo) bool
	// Session starts one placement attempt that judges members in the
	// order the planner places them, each with the members placed before
	// it counted on their nodes: what the filters see when the scheduler
	// reserves the members one after the other. The planner uses it for
	// gangs whose members interfere with each other (Shape.Interfering).
	Session(ctx context.Context) Session
}

// Session is one placement attempt of a gang whose members interfere.
type Session interface {
	// Fits reports whether one more member of shape s passes every filter
	// on ni, with the members placed so far counted; ni holds those of them
	// placed on it. Calls for one shape may run in parallel; never at the
	// same time as Place.
	Fits(ctx context.Context, s *Shape, ni fwk.NodeInfo) bool
	// Place records that member pi, of shape s, goes to ni (ni as before
	// pi is added).
	Place(ctx context.Context, s *Shape, pi fwk.PodInfo, ni fwk.NodeInfo)
}

// FilterFunc adapts a function that judges one node alone to Filter: its
// sessions ask the same function about a node holding the members placed
// on it, so members interfere only through the node they share.
type FilterFunc func(ctx context.Context, s *Shape, ni fwk.NodeInfo) bool

// Check implements Filter.
func (f FilterFunc) Check(ctx context.Context, s *Shape, ni fwk.NodeInfo) bool { return f(ctx, s, ni) }

// Session implements Filter.
func (f FilterFunc) Session(context.Context) Session { return funcSession(f) }

type funcSession FilterFunc

func (f funcSession) Fits(ctx context.Context, s *Shape, ni fwk.NodeInfo) bool { return f(ctx, s, ni) }
func (funcSession) Place(context.Context, *Shape, fwk.PodInfo, fwk.NodeInfo)   {}

// PodOnNode is a pod and the node it is on.
type PodOnNode struct {
	Pod  fwk.PodInfo
	Node fwk.NodeInfo
}

// Remover is a Filter built on a snapshot that can judge it with some of
// its pods gone (preemption's victims, terminating pods): the filters'
// cluster-wide state (pod affinity counts, spread counts) must forget them
// too, not only their nodes.
type Remover interface {
	Without(removed []PodOnNode) Filter
}

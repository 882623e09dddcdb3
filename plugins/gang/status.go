package gang

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// statusUpdater keeps PodGroup status (phase, running, scheduleStartTime)
// current from the scheduler side. Writes are asynchronous, coalesced per
// PodGroup, at most one per PodGroup per statusMinInterval, and made only
// when something changed.
type statusUpdater struct {
	p     *Plugin
	queue workqueue.TypedRateLimitingInterface[types.NamespacedName]

	mu sync.Mutex
	// lastWrite is when each PodGroup's status was last written.
	lastWrite map[types.NamespacedName]time.Time
}

// statusDelay coalesces bursts: a gang's members are created, planned,
// bound and started within about a second when capacity is there, and each
// step enqueues the PodGroup. One write at the end of such a burst tells a
// reader as much as one per step, and every write is an etcd transaction
// competing with the pod creates and binds of the same moment.
const statusDelay = time.Second

// statusMinInterval is the least time between two status writes of one
// PodGroup; a change within it is written when it has passed.
const statusMinInterval = time.Second

func newStatusUpdater(p *Plugin) *statusUpdater {
	return &statusUpdater{
		p: p,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName](),
			workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "muster-gang-status"},
		),
		lastWrite: map[types.NamespacedName]time.Time{},
	}
}

// holdOff is how long a write of key must still wait at now to keep
// statusMinInterval since the last one (0: it may go now).
func (s *statusUpdater) holdOff(key types.NamespacedName, now time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	last, ok := s.lastWrite[key]
	if !ok {
		return 0
	}
	return max(0, statusMinInterval-now.Sub(last))
}

func (s *statusUpdater) wrote(key types.NamespacedName, at time.Time) {
	s.mu.Lock()
	s.lastWrite[key] = at
	s.mu.Unlock()
}

func (s *statusUpdater) forget(key types.NamespacedName) {
	s.mu.Lock()
	delete(s.lastWrite, key)
	s.mu.Unlock()
}

func (s *statusUpdater) enqueue(key types.NamespacedName) {
	s.queue.AddAfter(key, statusDelay)
}

func (s *statusUpdater) run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		s.queue.ShutDown()
	}()
	for {
		key, shutdown := s.queue.Get()
		if shutdown {
			return
		}
		if err := s.sync(ctx, key); err != nil {
			klog.FromContext(ctx).V(3).Info("PodGroup status update failed; retrying", "podGroup", key, "err", err)
			s.queue.AddRateLimited(key)
		} else {
			s.queue.Forget(key)
		}
		s.queue.Done(key)
	}
}

// desiredStatus derives the status from the members and the plugin's state.
func (p *Plugin) desiredStatus(pg *schedv1alpha1.PodGroup, key types.NamespacedName, now time.Time) schedv1alpha1.PodGroupStatus {
	st := *pg.Status.DeepCopy()
	bound, running := 0, 0
	for _, m := range p.members(key) {
		if m.Spec.NodeName != "" {
			bound++
		}
		if m.Status.Phase == v1.PodRunning {
			running++
		}
	}
	inFlight := p.gangs.InFlight(key)
	want := minMember(pg)
	st.Running = int32(running)
	switch {
	case running >= want:
		st.Phase = schedv1alpha1.PodGroupRunning
	case bound >= want || inFlight > 0:
		st.Phase = schedv1alpha1.PodGroupScheduling
	case bound > 0:
		// Part of the gang is bound and nothing is being placed: the state
		// the eviction loop resolves after its grace period.
		st.Phase = schedv1alpha1.PodGroupUnknown
	default:
		st.Phase = schedv1alpha1.PodGroupPending
	}
	if st.Phase != schedv1alpha1.PodGroupPending && st.ScheduleStartTime.IsZero() {
		st.ScheduleStartTime = metav1.NewTime(now)
	}
	return st
}

func (s *statusUpdater) sync(ctx context.Context, key types.NamespacedName) error {
	p := s.p
	// Only the leader writes: it is the one whose state is current.
	if !p.leading.Load() {
		return nil
	}
	pg := p.podGroup(key)
	if pg == nil {
		s.forget(key)
		return nil
	}
	now := p.clock.Now()
	p.noteElastic(pg, key)
	st := p.desiredStatus(pg, key, now)
	if st.Phase == pg.Status.Phase && st.Running == pg.Status.Running && st.ScheduleStartTime.Equal(&pg.Status.ScheduleStartTime) {
		return nil
	}
	if wait := s.holdOff(key, now); wait > 0 {
		// Written recently: write what holds then, not every step between.
		s.queue.AddAfter(key, wait)
		return nil
	}
	upd := pg.DeepCopy()
	upd.Status = st
	_, err := p.pgClient.SchedulingV1alpha1().PodGroups(pg.Namespace).UpdateStatus(ctx, upd, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		s.forget(key)
		return nil
	}
	if err == nil {
		s.wrote(key, now)
	}
	return err
}

// observeBound records the time-to-bound metric the first time minMember
// members of a PodGroup are bound.
func (p *Plugin) observeBound(key types.NamespacedName) {
	pg := p.podGroup(key)
	if pg == nil {
		return
	}
	members := p.members(key)
	bound := 0
	var first time.Time
	for _, m := range members {
		if m.Spec.NodeName != "" {
			bound++
		}
		if t := m.CreationTimestamp.Time; first.IsZero() || t.Before(first) {
			first = t
		}
	}
	if bound < minMember(pg) {
		return
	}
	if p.gangs.QuorumBound(key, pg.UID) && !first.IsZero() {
		timeToBound.Observe(p.clock.Since(first).Seconds())
	}
}

// noteElastic says how an elastic gang (more members than minMember) is
// placed: the quorum and the extras above it, separately. The PodGroup
// status of scheduler-plugins has no field for that (Running counts every
// member, and the CRD's schema drops unknown fields), so it goes into a
// GangElastic event on the PodGroup, recorded when the counts change.
func (p *Plugin) noteElastic(pg *schedv1alpha1.PodGroup, key types.NamespacedName) {
	members := p.members(key)
	want := minMember(pg)
	if len(members) <= want || p.h == nil {
		return
	}
	msg := elasticSummary(key, members, want)
	if p.gangs.NoteElastic(key, msg) {
		p.recordEvent(pg, v1.EventTypeNormal, "GangElastic", "Scheduling", msg)
	}
}

// elasticSummary is "quorum q/min bound, extras e/n bound" for a gang with
// more members than its quorum.
func elasticSummary(key types.NamespacedName, members []*v1.Pod, want int) string {
	bound := 0
	for _, m := range members {
		if m.Spec.NodeName != "" {
			bound++
		}
	}
	quorum := min(bound, want)
	return fmt.Sprintf("gang %s: quorum %d/%d bound, extras %d/%d bound", key, quorum, want, bound-quorum, len(members)-want)
}

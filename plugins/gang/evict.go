package gang

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// evictLoop finds gangs left partly bound — fewer than minMember members
// bound, others pending, no bind in flight — for longer than the grace period
// and evicts their bound members, so that no gang stays half placed after,
// say, a scheduler died between binds. A gang that can be completed is
// completed by the normal cycle well within the grace period (the bound
// members count toward the quorum and stay where they are).
//
// Gangs with no pending member are left alone: nothing is trying to complete
// them, and evicting running pods of a gang that lost a member is the
// workload controller's decision.
func (p *Plugin) evictLoop(ctx context.Context) {
	grace := time.Duration(*p.args.PartialGangGracePeriodSeconds) * time.Second
	tick := min(max(grace/5, 100*time.Millisecond), 5*time.Second)
	t := p.clock.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		// Only the leader acts: a standby's view of reservations is empty.
		if !p.leading.Load() || !p.pgSynced.Load() {
			continue
		}
		pgs, err := p.pgLister.List(labels.Everything())
		if err != nil {
			continue
		}
		now := p.clock.Now()
		for _, pg := range pgs {
			p.checkPartial(ctx, pg, now, grace)
		}
	}
}

func (p *Plugin) checkPartial(ctx context.Context, pg *schedv1alpha1.PodGroup, now time.Time, grace time.Duration) {
	key := types.NamespacedName{Namespace: pg.Namespace, Name: pg.Name}
	var bound []*v1.Pod
	boundUIDs := map[types.UID]bool{}
	pending := 0
	for _, m := range p.members(key) {
		if m.Spec.NodeName != "" {
			bound = append(bound, m)
			boundUIDs[m.UID] = true
		} else {
			pending++
		}
	}
	// Partly bound, unless a bind in flight may still complete the gang
	// (lifecycle.Tracker.NotePartial).
	since, partial := p.gangs.NotePartial(key, boundUIDs, len(bound) > 0 && len(bound) < minMember(pg) && pending > 0, now)
	if !partial || now.Sub(since) < grace {
		return
	}
	msg := fmt.Sprintf("evicting partly bound gang %s: %d of %d members bound for %s and the rest cannot be placed", key, len(bound), minMember(pg), now.Sub(since).Round(time.Second))
	klog.FromContext(ctx).Info("Evicting partly bound gang", "gang", key, "bound", len(bound), "minMember", minMember(pg))
	p.recordEvent(pg, v1.EventTypeWarning, "EvictingPartialGang", "Evicting", msg)
	for _, m := range bound {
		// Preconditions keep us from deleting a pod that was replaced.
		err := p.h.ClientSet().CoreV1().Pods(m.Namespace).Delete(ctx, m.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &m.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			klog.FromContext(ctx).Error(err, "Evicting gang member", "pod", klog.KObj(m))
		}
	}
	p.gangs.EvictedPartial(key)
	partialEvictions.Inc()
	p.status.enqueue(key)
}

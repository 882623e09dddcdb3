package devices

import (
	"context"
	"fmt"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"

	"github.com/muster-io/muster/api"
)

// apiTimeout bounds each claim write: they happen in a scheduling cycle.
const apiTimeout = 5 * time.Second

// sharedClaims are the claims pods name (not made from a template) that
// are not allocated yet, each with the first pod naming it.
func (c *Counter) sharedClaims(pods []*v1.Pod) (claims []*resourceapi.ResourceClaim, first []*v1.Pod) {
	seen := map[types.UID]bool{}
	for _, pod := range pods {
		for i := range pod.Spec.ResourceClaims {
			name := pod.Spec.ResourceClaims[i].ResourceClaimName
			if name == nil {
				continue
			}
			claim, err := c.dra.ResourceClaims().Get(pod.Namespace, *name)
			if err != nil || claim.Status.Allocation != nil || seen[claim.UID] {
				continue
			}
			seen[claim.UID] = true
			claims, first = append(claims, claim), append(first, pod)
		}
	}
	return claims, first
}

// AllocateShared allocates, ahead of the members, each claim the gang's
// pods share that is not allocated yet, for the node the plan gives the
// first member naming it. The scheduler allocates a claim when the first
// pod using it is reserved and writes it when that pod binds; until then
// the DynamicResources plugin refuses every other pod using it ("in the
// process of being allocated"), and the gang's first member, held at
// Permit until the others are reserved, never binds. Allocated here, as
// the DynamicResources plugin would (same allocator, finalizer, status),
// the claim confines every member to the nodes its devices reach.
//
// It reports whether it allocated any: the cycle that planned has read
// the claims as unallocated already, and must end so that the member is
// tried again with them allocated.
func (c *Counter) AllocateShared(ctx context.Context, client kubernetes.Interface, gang string, pods []*v1.Pod, nodeOf func(*v1.Pod) *v1.Node) (bool, error) {
	if c == nil {
		return false, nil
	}
	claims, first := c.sharedClaims(pods)
	done := false
	for i, claim := range claims {
		node := nodeOf(first[i])
		if node == nil {
			continue
		}
		if err := c.allocate(ctx, client, gang, claim, node); err != nil {
			return done, fmt.Errorf("allocating ResourceClaim %s/%s, shared by the gang's members, for node %s: %w", claim.Namespace, claim.Name, node.Name, err)
		}
		done = true
	}
	return done, nil
}

func (c *Counter) allocate(ctx context.Context, client kubernetes.Interface, gang string, claim *resourceapi.ResourceClaim, node *v1.Node) error {
	taken, err := c.dra.ResourceClaims().ListAllAllocatedDevices()
	if err != nil {
		return err
	}
	slices, err := c.dra.ResourceSlices().ListWithDeviceTaintRules()
	if err != nil {
		return err
	}
	state := structured.AllocatedState{AllocatedDevices: taken, AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](), AggregatedCapacity: structured.NewConsumedCapacityCollection()}
	alloc, err := structured.NewAllocator(ctx, dynamicresources.AllocatorFeatures(feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)), state, c.dra.DeviceClasses(), slices, c.cel)
	if err != nil {
		return err
	}
	results, err := alloc.Allocate(ctx, node, []*resourceapi.ResourceClaim{claim})
	if err != nil {
		return err
	}
	if len(results) != 1 {
		return fmt.Errorf("no free devices reach the node")
	}
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	updated := claim.DeepCopy()
	if updated.Annotations == nil {
		updated.Annotations = map[string]string{}
	}
	updated.Annotations[api.AnnotationAllocatedForGang] = gang
	if !hasFinalizer(updated) {
		// As the DynamicResources plugin: the finalizer keeps the claim
		// until its allocation is taken back.
		updated.Finalizers = append(updated.Finalizers, resourceapi.Finalizer)
	}
	updated, err = client.ResourceV1().ResourceClaims(claim.Namespace).Update(ctx, updated, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	updated.Status.Allocation = &results[0]
	if updated.Status.Allocation.AllocationTimestamp == nil {
		// The allocation is immutable once written, and the
		// DynamicResources plugin sets this when it finds it empty (with
		// device binding conditions), failing every member's PreBind.
		updated.Status.Allocation.AllocationTimestamp = &metav1.Time{Time: time.Now()}
	}
	updated, err = client.ResourceV1().ResourceClaims(claim.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	klog.FromContext(ctx).V(2).Info("Allocated a claim the gang's members share", "gang", gang, "claim", klog.KObj(claim), "node", node.Name)
	// The tracker sees the allocation before the informer does, so the
	// members' own cycles find it allocated.
	return c.dra.ResourceClaims().AssumeClaimAfterAPICall(updated)
}

func hasFinalizer(claim *resourceapi.ResourceClaim) bool {
	return slices.Contains(claim.Finalizers, resourceapi.Finalizer)
}

// ReleaseShared takes back the allocations AllocateShared made for gang
// that no pod uses yet (no consumer reserved): a gang that cannot be
// placed where its shared claims were allocated must not keep their
// devices, and is planned anew with them free.
func (c *Counter) ReleaseShared(ctx context.Context, client kubernetes.Interface, gang string, pods []*v1.Pod) error {
	if c == nil {
		return nil
	}
	seen := map[string]bool{}
	for _, pod := range pods {
		for i := range pod.Spec.ResourceClaims {
			name := pod.Spec.ResourceClaims[i].ResourceClaimName
			if name == nil || seen[*name] {
				continue
			}
			seen[*name] = true
			claim, err := c.dra.ResourceClaims().Get(pod.Namespace, *name)
			if err != nil || claim.Status.Allocation == nil || len(claim.Status.ReservedFor) > 0 || claim.Annotations[api.AnnotationAllocatedForGang] != gang {
				continue
			}
			if err := c.release(ctx, client, claim); err != nil {
				return fmt.Errorf("releasing ResourceClaim %s/%s allocated for gang %s: %w", claim.Namespace, claim.Name, gang, err)
			}
		}
	}
	return nil
}

func (c *Counter) release(ctx context.Context, client kubernetes.Interface, claim *resourceapi.ResourceClaim) error {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	updated := claim.DeepCopy()
	updated.Status.Allocation = nil
	updated, err := client.ResourceV1().ResourceClaims(claim.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	delete(updated.Annotations, api.AnnotationAllocatedForGang)
	updated.Finalizers = slices.DeleteFunc(updated.Finalizers, func(f string) bool { return f == resourceapi.Finalizer })
	updated, err = client.ResourceV1().ResourceClaims(claim.Namespace).Update(ctx, updated, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	klog.FromContext(ctx).V(2).Info("Released a claim allocated for a gang that found no placement", "claim", klog.KObj(claim))
	return c.dra.ResourceClaims().AssumeClaimAfterAPICall(updated)
}
